#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The tree (docs/protocol.md): with several tasks per node, each node's lowest rank relays for
# the node's other launchers over one connection to the coordinator. srun -N3
# --ntasks-per-node=2 puts ranks 0-1 on n1, 2-3 on n2 and 4-5 on n3: ranks 0, 2 and 4 lead.
#  1. success ends 0 with every trainer's output, every follower registered through its relay;
#  2. a follower's trainer failing aborts the step naming that rank;
#  3. a leader's trainer ending early (a worker done) keeps its node's relay up until its
#     followers are done: the step still ends 0;
#  4. kill -9 of a follower's launcher is reported as that rank's launcher lost;
#  5. kill -9 of a node LEADER's launcher: the coordinator reports the leader's rank lost, its
#     follower loses its relay (`aborting: coordinator at rank 2's relay @tfslurm-<uid>/
#     relay-<job>.<step>-2 lost (connection closed); cancelling step ...`), stops its trainer
#     and cancels the step; srun exits 137 and nothing is left on that node.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# --- 1. success ------------------------------------------------------------------------------
rc=0
# shellcheck disable=SC2016 # expanded by the task's shell
out=$(run_bounded 90 srun -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run -v --auth munge -- \
    bash -c 'echo "rank $SLURM_PROCID on $(hostname)"' 2>&1) || rc=$?
assert_eq 0 "$rc" "the step ends 0"$'\n'"$out"
expected=$(printf 'rank %s on n1\n' 0 1; printf 'rank %s on n2\n' 2 3; printf 'rank %s on n3\n' 4 5)
assert_eq "$expected" "$(grep -v '^tfslurm' <<<"$out" | sort -V)" "every trainer ran once"$'\n'"$out"
for relay in "rank 0 (worker:0): relaying for ranks 1" "rank 2 (worker:2): relaying for ranks 3" \
    "rank 4 (worker:4): relaying for ranks 5"; do
    assert_eq 1 "$(grep -cF "$relay" <<<"$out")" "each leader relays for its node"$'\n'"$out"
done
assert_eq 3 "$(grep -c "coordinator at rank [024]'s relay @tfslurm-" <<<"$out")" \
    "every follower registered through its relay"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: \(error\|warning\)' <<<"$out")" "no error or warning"$'\n'"$out"
e2e_log "success through the tree"

# --- 2. a follower's trainer fails -------------------------------------------------------------
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run --auth munge --grace 5 -- \
    "$E2E_TRAINER" --work-ms 60000 --on rank=3 --work-ms 500 --exit-code 3 2>&1) || rc=$?
assert_eq 3 "$rc" "srun reports the failing trainer's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 3 (worker:3) on n2 exited with status 3"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "one line names the follower"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "no other error line"$'\n'"$out"
e2e_log "a follower's failure aborts the step"

# --- 3. a leader's trainer ends early ----------------------------------------------------------
rc=0
# shellcheck disable=SC2016 # expanded by the task's shell
out=$(run_bounded 90 srun -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run --auth munge -- bash -c \
    'if ((SLURM_PROCID % 2 == 0)); then echo "leader $SLURM_PROCID done"; exit 0; fi
     sleep 2; echo "rank $SLURM_PROCID done"' 2>&1) || rc=$?
assert_eq 0 "$rc" "the step ends 0"$'\n'"$out"
# A normal end where every rank ended by itself prints no line of tfslurm's.
expected=$(printf 'leader %s done\n' 0 2 4; printf 'rank %s done\n' 1 3 5)
assert_eq "$expected" "$(sort -V <<<"$out")" "the followers finished after their leaders"$'\n'"$out"
e2e_log "leaders done early keep relaying"

# kill_launcher_of RANK WHAT: start a 3-node, 2-tasks-per-node step of long trainers, SIGKILL
# the launcher of RANK (on n2) once every trainer listens, and wait for srun. Sets `dir` (the
# tasks' outputs), `rc` (srun's status) and `out` (every output).
kill_launcher_of() {
    local rank=$1 what=$2 srun_pid victim='' pid
    dir=$(make_tmpdir)
    timeout -k 5 120 srun -N3 --ntasks-per-node=2 -o "$dir/task-%t.out" "$E2E_TFSLURM" run \
        --auth munge --grace 3 --heartbeat 0.5 --heartbeat-timeout 3 -- "$E2E_TRAINER" \
        --work-ms 60000 >"$dir/srun.out" 2>&1 &
    srun_pid=$!
    on_exit "kill $srun_pid 2>/dev/null || true"
    wait_for_lines "$k_trainer_listening" 6 60 "$dir"/task-{0..5}.out
    for pid in $(launcher_pids n2); do
        if tr '\0' '\n' <"/proc/$pid/environ" | grep -x "SLURM_PROCID=$rank" >/dev/null; then
            victim=$pid
        fi
    done
    [[ -n $victim ]] || fail "no launcher of rank $rank ($what) on n2"
    kill -KILL "$victim"
    e2e_log "killed the launcher of rank $rank, $what (pid $victim)"
    rc=0
    wait "$srun_pid" || rc=$?
    out=$(cat -- "$dir"/task-{0..5}.out)$'\n'$(cat "$dir/srun.out")
}

# --- 4. kill -9 of a follower's launcher -------------------------------------------------------
kill_launcher_of 3 "a follower"
assert_eq 137 "$rc" "srun reports the killed launcher's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 3 (worker:3) on n2 launcher lost (connection closed)"
assert_eq 1 "$(grep -cF "$line" "$dir/task-0.out")" "rank 0's launcher names the lost rank"$'\n'"$out"
assert_eq 0 "$(grep -c 'exiting with status 0' <<<"$out")" "workers stopped early"$'\n'"$out"

no_leftovers 20
e2e_log "a follower's launcher killed"

# --- 5. kill -9 of a node leader's launcher ----------------------------------------------------
kill_launcher_of 2 "n2's leader"
assert_eq 137 "$rc" "srun reports the killed leader's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 2 (worker:2) on n2 launcher lost (connection closed)"
assert_eq 1 "$(grep -cF "$line" "$dir/task-0.out")" "rank 0's launcher names the leader"$'\n'"$out"
# The follower's own observation: its relay (in the killed launcher) is gone.
line="tfslurm: error: aborting: coordinator at rank 2's relay @tfslurm-$(id -u)/relay-[0-9]+\.[0-9]+-2 lost \(connection closed\); cancelling step [0-9]+\.[0-9]+ through Slurm"
assert_eq 1 "$(grep -cxE "$line" "$dir/task-3.out")" \
    "rank 3 reports its relay lost and cancels the step"$'\n'"$out"
assert_contains "$(cat "$dir/task-3.out")" "received SIGTERM" "rank 3's trainer was stopped"
assert_eq 0 "$(grep -c 'exiting with status 0' <<<"$out")" "workers stopped early"$'\n'"$out"
assert_contains "$(cat "$dir/srun.out")" "srun: error: n2: task 2: Killed" "srun reports the killed task"

no_leftovers 20
e2e_log "PASS"
