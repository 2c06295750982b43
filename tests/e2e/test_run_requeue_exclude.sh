#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Bad nodes left out: a 2-node batch job (of the 3 nodes) runs `tfslurm run --requeue
# --max-requeues 1`. In run 1 every process of the step on rank 1's node is killed (as in
# test_run_node_lost.sh): rank 0's launcher declares it lost and, instead of only cancelling the
# step, requeues the job with that node in its ExcNodeList (set with scontrol right after the
# requeue: Slurm takes it only once the job is pending again) and the why in its comment. The
# requeued run runs on the other two nodes and its rank 0 says which node was left out and why.
# In that run rank 1's node is killed too: the budget is spent, the line says so, and the step
# is cancelled as without --requeue (srun 137, the job's exit code).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

requeue_job "$dir" --grace 3 --heartbeat 0.5 --heartbeat-timeout 3 -- "$E2E_TRAINER" --work-ms 60000
jid=$E2E_JOB

# kill_rank1_node RUN: every process of the step on the node of run RUN's rank 1 but slurmd
# (the node stays up: its connections are reset); prints the node.
kill_rank1_node() {
    local run=$1 node
    local -a nodes
    wait_for_lines "$k_trainer_listening" 2 90 "$dir/run$run-task0.out" "$dir/run$run-task1.out"
    mapfile -t nodes < <(timeout 10 scontrol show hostnames "$(cat "$dir/nodes$run")")
    node=${nodes[1]}
    lose_node "$node" "run $run" >&2
    printf '%s\n' "$node"
}

lost=$(kill_rank1_node 0)
wait_requeued "$jid" 60 "run 0" "$dir/run0*"
assert_eq 1 "$(grep -cxF "tfslurm: error: aborting: rank 1 (worker:1) on $lost launcher lost (connection closed); requeueing job $jid without $lost (requeue 1 of 1)" "$dir/run0-task0.out")" \
    "run 0: rank 0 requeues the job without $lost and says so: $(cat "$dir"/run0*)"
assert_eq "$lost" "$(timeout 10 squeue -h -j "$jid" -o %x)" "the requeued job's ExcNodeList"
assert_eq "tfslurm run 1: $lost left out (rank 1 launcher lost); no progress" \
    "$(timeout 10 squeue -h -j "$jid" -o %k)" "the requeued job's comment carries why"
# As test_run_checkpoint.sh: the requeued job waits for its begin time; not at once (slurmd
# refuses a launch credential not newer than the requeue's revocation).
sleep 2
run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"

lost2=$(kill_rank1_node 1)
[[ $(timeout 10 scontrol show hostnames "$(cat "$dir/nodes1")") != *"$lost"* ]] ||
    fail "run 1 runs on $(cat "$dir/nodes1"), with $lost that was left out"
rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 137 "$rc" "job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir"/run1*)"
assert_eq "srun: 137" "$(cat "$dir/run1.out")" "run 1: the cancel ended srun"
assert_eq "tfslurm: warning: requeued run 2 of 2: $lost left out (rank 1 launcher lost in run 1)
tfslurm: error: aborting: rank 1 (worker:1) on $lost2 launcher lost (connection closed); not requeueing job $jid without $lost2: it was requeued 1 times already (--max-requeues 1); cancelling step $jid.0 through Slurm" \
    "$(grep '^tfslurm: ' "$dir/run1-task0.out")" "run 1: rank 0 says what was left out, then that the budget is spent"
assert_eq 0 "$(grep -c '^tfslurm: ' "$dir/run1-task1.out" || true)" "run 1: rank 1 says nothing"

no_leftovers 20
e2e_log "PASS"
