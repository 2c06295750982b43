#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Preemption the TensorFlow way: examples/checkpoint-requeue/job.sbatch with its TensorFlow
# trainer (TRAINER=train_tf.py: two MultiWorkerMirroredStrategy workers on two nodes whose
# tf.distribute.experimental.PreemptionCheckpointHandler has a TerminationConfig watching for
# SIGUSR1), in a job with a one-minute limit and `tfslurm run --checkpoint-before 30 --requeue`.
# About 30 s in, tfslurm sends SIGUSR1; TensorFlow's handler lets both workers finish the same
# step, saves the checkpoint and exits 0; rank 0's launcher requeues the job. The job comes
# back (released 2 s after the requeue, as in test_run_checkpoint.sh), the handler restores the
# checkpoint: both workers start at the saved step (TensorFlow's own step counter,
# total_run_calls, restored from the checkpoint), train 5 more steps and the job ends 0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")
example=$EXAMPLES/checkpoint-requeue

e2e_log "TRAINER=train_tf.py sbatch --time=1 examples/checkpoint-requeue/job.sbatch --resume-steps 5"
jid=$(TRAINER=train_tf.py CHECKPOINT_BEFORE=30 CHECKPOINT_DIR=$dir sbatch_submit -D "$example" \
    --time=1 -o "$dir/job.out" "$example/job.sbatch" --resume-steps 5)

# The first run ends with a requeue: wait for the job to be pending again, then let it start.
wait_requeued "$jid" 120 "output" "$dir/job.out"
# slurmd refuses a launch credential of the requeued job that is not newer (in whole seconds)
# than the requeue's revocation: what Slurm's begin time waits for.
sleep 2
run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"
rc=0
sbatch_wait "$jid" 180 || rc=$?
out=$(cat "$dir/job.out")
assert_eq 0 "$rc" "job $jid exit code (state $E2E_JOB_STATE):"$'\n'"$out"

# The step saved: the same on both workers (the handler agrees on it), after some training.
[[ $out =~ worker:0\ on\ ${n[0]}:\ checkpoint\ saved\ at\ step\ ([0-9]+)\ in\ run\ 0 ]] ||
    fail "worker 0 saved no checkpoint in run 0:"$'\n'"$out"
saved=${BASH_REMATCH[1]}
((saved > 0)) || fail "the checkpoint was saved before the first step: $saved"
assert_eq "$(printf '%s\n' \
    "worker:0 on ${n[0]}: starting at step 0 in run 0" \
    "worker:1 on ${n[1]}: starting at step 0 in run 0" \
    "worker:0 on ${n[0]}: checkpoint saved at step $saved in run 0; exiting for the requeue" \
    "worker:1 on ${n[1]}: checkpoint saved at step $saved in run 0; exiting for the requeue" \
    "worker:0 on ${n[0]}: starting at step $saved in run 1" \
    "worker:1 on ${n[1]}: starting at step $saved in run 1" \
    "worker:0 on ${n[0]}: done at step $((saved + 5)) in run 1" \
    "worker:1 on ${n[1]}: done at step $((saved + 5)) in run 1" | sort)" \
    "$(grep -E '^worker:[01] on ' <<<"$out" | sort)" \
    "run 0 saves at one step on both workers; run 1 resumes there (the restored step counter)"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 30); requeueing job $jid (requeue 1 of 10)" \
    "$(grep '^tfslurm: warning' <<<"$out")" "rank 0's launcher requeues the job"
assert_eq "" "$(grep '^tfslurm: error' <<<"$out" || true)" "no error"
[[ -s $dir/checkpoint ]] || fail "no checkpoint index in $dir: $(ls "$dir")"
no_leftovers 20
e2e_log "PASS: saved at step $saved, resumed there"
