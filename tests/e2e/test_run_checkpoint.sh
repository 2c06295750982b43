#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Time limits: a batch job with a 1 minute limit runs `tfslurm run --checkpoint-before 50
# --requeue --max-requeues 1`. About 10 s in, every trainer gets SIGUSR1 (long before Slurm's
# SIGTERM at the limit, which they would print), saves and exits 0; rank 0's launcher says so
# and requeues the job through libslurm (no scontrol). The job comes back (Slurm 22.05 holds a
# requeued job until its begin time, cred_expire + 1 s later: the test moves it to 2 s after
# the requeue) and its second run sees SLURM_RESTART_COUNT=1, finds its checkpoint and ends 0.
# Both runs' trainers have one TFSLURM_RUN_ID, the job's (a logger continues one run). Then an
# srun job, which Slurm does not requeue: the launcher says why, and the status is 10.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

# The trainer's contract: the handler only sets a flag; the work (here: the "checkpoint")
# happens outside it.
cat >"$dir/trainer.sh" <<'TRAINER'
#!/bin/bash
saved=0
trap 'saved=1' USR1
trap 'echo "rank $SLURM_PROCID got SIGTERM"; exit 143' TERM
restart=${SLURM_RESTART_COUNT:-0}
echo "$TFSLURM_RUN_ID" >"$OUT_DIR/run_id.$restart.$SLURM_PROCID"
if [[ -e $OUT_DIR/checkpoint.$SLURM_PROCID ]]; then
    echo "rank $SLURM_PROCID resumed from $(cat "$OUT_DIR/checkpoint.$SLURM_PROCID") in run $restart"
    exit 0
fi
while ((saved == 0)); do sleep 0.1; done
echo "run $restart" >"$OUT_DIR/checkpoint.$SLURM_PROCID"
echo "rank $SLURM_PROCID saved a checkpoint in run $restart of job $SLURM_JOB_ID"
TRAINER
chmod +x "$dir/trainer.sh"

cat >"$dir/job.sh" <<'JOB'
#!/bin/bash
run=${SLURM_RESTART_COUNT:-0}
srun "$E2E_TFSLURM" run --checkpoint-before 50 --requeue --max-requeues 1 -- \
    "$OUT_DIR/trainer.sh" >"$OUT_DIR/run$run.out" 2>"$OUT_DIR/run$run.err"
echo "srun: $?" >>"$OUT_DIR/run$run.out"
JOB
chmod +x "$dir/job.sh"

jid=$(OUT_DIR=$dir sbatch_submit -N2 --ntasks-per-node=1 --time=1 --requeue --export=ALL \
    -o /dev/null -e "$dir/job.err" "$dir/job.sh")

# (srun's own notes in run0.err about the tasks that exited 10, or the step ended by the requeue,
# are not tfslurm's: only tfslurm's lines are compared, the info lines by count since the time
# left is measured.)
# The first run ends with a requeue: wait for the job to be pending again, then let it start.
wait_requeued "$jid" 60 "run 0" "$dir/run0.*"
# Not at once: slurmd refuses a launch credential of the requeued job that is not newer (in
# whole seconds) than the requeue's revocation; what Slurm's begin time waits for.
sleep 2
run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"
rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 0 "$rc" "job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir"/run*.* "$dir/job.err"; timeout 10 scontrol show job "$jid")"

assert_eq "rank 0 saved a checkpoint in run 0 of job $jid
rank 1 saved a checkpoint in run 0 of job $jid" "$(grep -v '^srun: ' "$dir/run0.out" | sort)" \
    "first run: every trainer got the checkpoint signal (and no SIGTERM) and saved"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 50); requeueing job $jid (requeue 1 of 1)" \
    "$(grep '^tfslurm: warning' "$dir/run0.err")" "first run: rank 0 says that it requeues the job"
assert_eq 1 "$(grep -c '^tfslurm: info: rank 0 (worker:0): the job ends in .*: asking the trainer to save a checkpoint (signal 10 (User defined signal 1))$' "$dir/run0.err")" \
    "first run: rank 0 tells that the trainers are asked for a checkpoint"
assert_eq 0 "$(grep -c 'rank 1 (worker:1): the job ends in' "$dir/run0.err")" \
    "first run: the other launchers say it only at debug level"
assert_eq "rank 0 resumed from run 0 in run 1
rank 1 resumed from run 0 in run 1
srun: 0" "$(sort "$dir/run1.out")" "second run: SLURM_RESTART_COUNT=1, resumed, ended 0"
assert_eq "" "$(cat "$dir/run1.err")" "second run: done, no checkpoint, no requeue, no line"
cluster=$(run_bounded 10 scontrol show config | sed -nE 's/^ClusterName += (.*)$/\1/p')
assert_eq "$cluster-$jid-0
$cluster-$jid-0
$cluster-$jid-0
$cluster-$jid-0" "$(cat "$dir"/run_id.{0,1}.{0,1})" "one run id in both runs, the job's"


# A job that Slurm does not requeue (srun's own allocation: not a batch job): the line gives
# Slurm's reason and the step ends checkpointed, status 10.
dir2=$(make_tmpdir)
OUT_DIR=$dir2 run_stdout 10 60 srun -N2 --ntasks-per-node=1 --time=1 --export=ALL \
    "$E2E_TFSLURM" run --checkpoint-before 55 --requeue -- "$dir/trainer.sh"
[[ $E2E_OUTPUT =~ of\ job\ ([0-9]+) ]] || fail "no job id in: $E2E_OUTPUT"
jid2=${BASH_REMATCH[1]}
assert_eq "rank 0 saved a checkpoint in run 0 of job $jid2
rank 1 saved a checkpoint in run 0 of job $jid2" "$(sort <<<"$E2E_OUTPUT")" \
    "srun job: every trainer saved"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 55); requeueing job $jid2 (requeue 1 of 3)
tfslurm: warning: job $jid2 not requeued: slurm: cannot requeue job $jid2: Only batch jobs are accepted or processed" \
    "$(grep '^tfslurm: warning' <<<"$E2E_STDERR")" "srun job: Slurm's refusal is told"

no_leftovers 20
e2e_log "PASS"
