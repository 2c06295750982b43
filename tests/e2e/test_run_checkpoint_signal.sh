#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Slurm's own --signal as the checkpoint: `srun --signal=USR1@20 --time=1 tfslurm run --requeue`.
# slurmctld signals the step on its first 30 s check at which the job ends within 20 + 30 s
# (send_job_warn_signal), so 10 to 40 s after the job's start: never before the trainer is
# there to catch it (a signal before the step runs would be lost). slurmstepd
# delivers SIGUSR1 to every process of the step, so each trainer gets it exactly once (tfslurm
# does not forward a second copy); the step then ends checkpointed "from Slurm", and the requeue
# of this srun job (not a batch job) is refused by Slurm with its reason: status 10.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

# Counts the signals it gets (the handler only counts), waits a second for a second copy, and
# reports.
cat >"$dir/trainer.sh" <<'TRAINER'
#!/bin/bash
n=0
trap 'n=$((n + 1))' USR1
while ((n == 0)); do sleep 0.1; done
sleep 1
echo "rank $SLURM_PROCID got $n SIGUSR1 in job $SLURM_JOB_ID"
TRAINER
chmod +x "$dir/trainer.sh"

run_stdout 10 90 srun -N2 --ntasks-per-node=1 --time=1 --signal=USR1@20 \
    "$E2E_TFSLURM" run --requeue -- "$dir/trainer.sh"
[[ $E2E_OUTPUT =~ in\ job\ ([0-9]+) ]] || fail "no job id in: $E2E_OUTPUT"
jid=${BASH_REMATCH[1]}
assert_eq "rank 0 got 1 SIGUSR1 in job $jid
rank 1 got 1 SIGUSR1 in job $jid" "$(sort <<<"$E2E_OUTPUT")" "each trainer got Slurm's signal once"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) from Slurm; requeueing job $jid (requeue 1 of 3)
tfslurm: warning: job $jid not requeued: slurm: cannot requeue job $jid: Only batch jobs are accepted or processed" \
    "$(grep '^tfslurm: warning' <<<"$E2E_STDERR")" "the checkpoint came from Slurm; the requeue is refused"
assert_eq 2 "$(grep -c '^tfslurm: info: rank [01] (worker:[01]): the trainer received the checkpoint signal 10 (User defined signal 1) from Slurm$' <<<"$E2E_STDERR")" \
    "each launcher saw Slurm's signal"

no_leftovers 20
e2e_log "PASS"
