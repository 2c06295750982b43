#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Rank 0's node lost, with --requeue: the surviving launchers requeue the job without it
# (docs/protocol.md, "Rank 0 lost"). A 2-node batch job, two tasks per node; rank 0's node is
# also the batch script's.
# 1. Every process of the job on rank 0's node but slurmd is killed (the batch script, srun,
#    rank 0's launcher with its coordinator, rank 1): rank 2, the other node's leader, sees its
#    connection closed and requeues the job at once without rank 0's node, says so in its line
#    and in the step's record; rank 3, a follower, leaves that to it. The requeued run runs on
#    the other two nodes, its rank 0 names the node left out, and it completes.
# 2. Rank 0's node cut off (its link down): rank 0 hears from 1 of the 2 nodes, a tie, and
#    leaves the first move to the other side (and says so); rank 2 hears nothing for the heartbeat timeout,
#    waits its turn, finds the job still running as the run found it and requeues it without
#    rank 0's node. One requeue (Restarts=1 with two allowed), only that node left out, and the
#    requeued run completes.
# The launchers log at debug level (only their warnings and errors are asserted on): a failure
# shows every task's whole story, with the processes still running and the daemons' lines.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# write_job DIR: a job script whose run R (SLURM_RESTART_COUNT) writes its nodes to DIR/nodesR
# and runs `srun tfslurm run --requeue --max-requeues 2` with its record in DIR/eventsR and each
# task's output, debug lines included, in DIR/runR-task<t>.out; the trainers of run 0 work for
# 60 s, the later ones for 0.5 s.
write_job() {
    cat >"$1/job.sh" <<'JOB'
#!/bin/bash
run=${SLURM_RESTART_COUNT:-0}
echo "$SLURM_JOB_NODELIST" >"$OUT_DIR/nodes$run"
work=500
((run > 0)) || work=60000
rc=0
export TFSLURM_LOG_LEVEL=debug
srun -o "$OUT_DIR/run$run-task%t.out" "$E2E_TFSLURM" run --requeue --max-requeues 2 \
    --auth munge --grace 3 --heartbeat 0.5 --heartbeat-timeout 3 \
    --events "$OUT_DIR/events$run" -- "$E2E_TRAINER" --work-ms "$work" || rc=$?
echo "srun: $rc" >"$OUT_DIR/run$run.out"
exit "$rc"
JOB
    chmod +x "$1/job.sh"
}

# start_job DIR: submit DIR/job.sh on 2 nodes, 2 tasks each; prints the job id once all four
# trainers of run 0 are listening (the caller, not this subshell, scancels it at exit: the id
# is in DIR/jid as soon as it is known).
start_job() {
    local dir=$1 jid
    write_job "$dir"
    jid=$(OUT_DIR=$dir E2E_TRAINER=$E2E_TRAINER sbatch_submit -N2 --ntasks-per-node=2 \
        --requeue --export=ALL -o /dev/null -e "$dir/job.err" "$dir/job.sh")
    printf '%s\n' "$jid" >"$dir/jid"
    wait_for_lines "$k_trainer_listening" 4 90 "$dir"/run0-task{0,1,2,3}.out
    printf '%s\n' "$jid"
}

# tfslurm_lines FILE: the launcher's warnings and errors in FILE (not its debug lines).
tfslurm_lines() {
    grep -E '^tfslurm: (warning|error): ' "$1" || true
}

# e2e_diagnose (called by fail()): the processes left on the nodes and the daemons' lines
# about the job of the part under way (its directory: $part_dir).
e2e_diagnose() {
    local node
    for node in $TC_NODE_NAMES; do
        node_processes "$node"
    done
    [[ ! -s ${part_dir-}/jid ]] || daemon_lines "$(cat "$part_dir/jid")"
}

# first_node DIR RUN: the first node of run RUN (rank 0's and the batch script's).
first_node() {
    timeout 10 scontrol show hostnames "$(cat "$1/nodes$2")" | sed -n 1p
}

# finish_requeued DIR JOBID LOST: release the requeued job, wait for run 1 to complete, and
# check what its rank 0 says and that it did not run on LOST.
finish_requeued() {
    local dir=$1 jid=$2 lost=$3 rc=0
    # As test_run_requeue_exclude.sh: the requeued job waits for its begin time.
    sleep 2
    run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"
    sbatch_wait "$jid" 120 || rc=$?
    assert_eq 0 "$rc" "job $jid: run 1 completes (state $E2E_JOB_STATE): $(cat "$dir"/run1* 2>/dev/null)"
    [[ $(timeout 10 scontrol show hostnames "$(cat "$dir/nodes1")") != *"$lost"* ]] ||
        fail "run 1 runs on $(cat "$dir/nodes1"), with $lost that was left out"
    assert_eq "tfslurm: warning: requeued run 2 of 3: $lost left out (rank 0 launcher lost in run 1)" \
        "$(tfslurm_lines "$dir/run1-task0.out")" "run 1: rank 0 names the node left out and why"
}

# --- 1. rank 0's node killed -------------------------------------------------------------------
dir=$(make_tmpdir)
part_dir=$dir
on_exit "[[ ! -s $dir/jid ]] || timeout 10 scancel \$(cat $dir/jid) 2>/dev/null || true"
jid=$(start_job "$dir")
lost=$(first_node "$dir" 0)
lose_node "$lost" "run 0"
wait_requeued "$jid" 60 "run 0" "$dir/run0*"
line=$(tfslurm_lines "$dir/run0-task2.out")
[[ $line =~ ^tfslurm:\ error:\ aborting:\ coordinator\ at\ [^\ ]+\ lost\ \(connection\ closed\)\;\ requeueing\ job\ $jid\ without\ $lost\ in\ rank\ 0\'s\ stead\ \(requeue\ 1\ of\ 2\)$ ]] ||
    fail "run 0: rank 2 requeues the job without $lost in rank 0's stead: $line; $(cat "$dir"/run0-task*.out)"
line=$(tfslurm_lines "$dir/run0-task3.out")
[[ $line =~ ^tfslurm:\ error:\ aborting:\ coordinator\ at\ rank\ 2\'s\ relay\ [^\ ]+\ lost\ \(connection\ closed\)$ ]] ||
    fail "run 0: rank 3, a follower, leaves the requeue to its leader: $line"
assert_eq "$lost" "$(timeout 10 squeue -h -j "$jid" -o %x)" "the requeued job's ExcNodeList"
assert_eq "tfslurm run 1: $lost left out (rank 0 launcher lost)" \
    "$(timeout 10 squeue -h -j "$jid" -o %k)" "the requeued job's comment carries why"
assert_eq 1 "$("$E2E_TFSLURM" events "$dir/events0" | grep -c "job $jid requeued without $lost (aborting: coordinator at .* lost (connection closed); requeueing job $jid without $lost in rank 0's stead (requeue 1 of 2))")" \
    "the step's record has the survivor's requeue: $("$E2E_TFSLURM" events "$dir/events0" 2>&1)"
finish_requeued "$dir" "$jid" "$lost"
no_leftovers 20

# --- 2. rank 0's node cut off ------------------------------------------------------------------
dir=$(make_tmpdir)
part_dir=$dir
on_exit "[[ ! -s $dir/jid ]] || timeout 10 scancel \$(cat $dir/jid) 2>/dev/null || true"
jid=$(start_job "$dir")
cut=$(first_node "$dir" 0)
cut_off "$cut"
# Rank 2 waits for the heartbeat timeout (3 s), its trainer's end (--grace 3), then its turn
# (--grace 3 + --heartbeat-timeout 3 + 2 s + 10 s), reads the job with scontrol (bounded at 30 s:
# run_client()) and requeues it (libslurm, bounded by slurmctld's MessageTimeout, 10 s): 24 s
# as a rule, 74 s at worst, and slurmctld, which still tries the cut-off node, can take that
# long on a busy machine (seen once in CI: no requeue after 69 s). A deadline by the clock,
# above that worst case.
info=
deadline=$((SECONDS + 120))
while ((SECONDS < deadline)); do
    info=$(timeout 10 scontrol show job -o "$jid" 2>&1 || true)
    [[ $info == *"Restarts=1"* ]] && break
    sleep 0.2
done
[[ $info == *"Restarts=1"* ]] || fail "job $jid was not requeued within 120 s: $info; $(cat "$dir"/run0-task*.out)"
restore_link "$cut"
e2e_log "job $jid requeued; link of $cut back up"
wait_requeued "$jid" 60 "run 0" "$dir/run0*"
line=$(tfslurm_lines "$dir/run0-task2.out")
[[ $line =~ ^tfslurm:\ error:\ aborting:\ coordinator\ at\ [^\ ]+\ lost\ \(no\ heartbeat\ for\ 3\ s\)\;\ requeueing\ job\ $jid\ without\ $cut\ in\ rank\ 0\'s\ stead\ \(requeue\ 1\ of\ 2\)$ ]] ||
    fail "run 0: rank 2 requeues the job without $cut in rank 0's stead: $line; $(cat "$dir"/run0-task*.out)"
assert_eq "$cut" "$(timeout 10 squeue -h -j "$jid" -o %x)" "only the cut-off node is left out"
# Rank 0 heard from 1 of the 2 nodes: it left the first move to rank 2 (2 × (3 + 3 + 12) + 15 s),
# and was ended by the requeue before its own turn came.
line=$(tfslurm_lines "$dir/run0-task0.out")
[[ $line =~ ^tfslurm:\ error:\ aborting:\ rank\ [23]\ \(worker:[23]\)\ on\ [^\ ]+\ launcher\ lost\ \(no\ heartbeat\ for\ 3\ s\)\;\ waiting\ 51\ s\ for\ a\ launcher\ of\ the\ other\ nodes\ to\ requeue\ job\ $jid\ first$ ]] ||
    fail "run 0: rank 0, without a majority, waits for the other side: $line"
finish_requeued "$dir" "$jid" "$cut"
info=$(timeout 10 scontrol show job -o "$jid" 2>&1 || true)
[[ $info == *" Restarts=1 "* ]] || fail "job $jid was requeued more than once: $info"
no_leftovers 20
e2e_log "PASS"
