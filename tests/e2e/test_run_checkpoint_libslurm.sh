#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `--checkpoint-before` learns the job's end from libslurm (slurm_get_end_time(), whose
# signature changed in 26.05) when SLURM_JOB_END_TIME is not in the task's environment (Slurm
# 22.05 does not set it; here it is removed on every release): a step of a job with a 1 minute
# limit and `--checkpoint-before 55` gets the checkpoint signal about 5 s in, and the launcher
# says so. Without a working libslurm call the line would be a warning that the end time
# cannot be read, and the trainer would wait for the signal until its bound.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

cat >"$dir/trainer.sh" <<'TRAINER'
#!/bin/bash
saved=0
trap 'saved=1' USR1
for ((i = 0; i < 400 && saved == 0; i++)); do sleep 0.1; done
((saved)) || { echo "rank $SLURM_PROCID: no checkpoint signal within 40 s"; exit 3; }
echo "rank $SLURM_PROCID saved a checkpoint; SLURM_JOB_END_TIME=${SLURM_JOB_END_TIME-unset}"
TRAINER
chmod +x "$dir/trainer.sh"

run_stdout 10 90 srun -N1 -n1 --time=1 env -u SLURM_JOB_END_TIME \
    "$E2E_TFSLURM" run --checkpoint-before 55 -- "$dir/trainer.sh"
assert_eq "rank 0 saved a checkpoint; SLURM_JOB_END_TIME=unset" "$E2E_OUTPUT" "the trainer got the checkpoint signal"
assert_contains "$E2E_STDERR" "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 55)" \
    "the launcher says it checkpointed"
[[ $E2E_STDERR != *"cannot read the job's end time"* ]] || fail "the end time was not read: $E2E_STDERR"

no_leftovers 20
e2e_log "PASS"
