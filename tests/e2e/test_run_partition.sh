#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A node cut off from the others ends the step, and once the link is back nothing of the step runs
# on it. n3's link (its veth) goes down for longer than the heartbeat timeout: rank 0's launcher
# declares rank 2's launcher lost, stops the surviving trainers and, after their grace, cancels
# the step through Slurm; srun ends with no scancel from us (137: the cancel's SIGKILL). On n3,
# the launcher loses the coordinator, stops its trainer by itself and tries to cancel the step too
# (slurmctld is out of reach while the link is down). After the link is back, n3's launcher has
# exited and none of the step's processes remains there. The link is restored and n3 resumed even
# when the test fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

node=n3

dir=$(make_tmpdir)
start_three_node_step "$dir"
log=$dir/srun.out srun_pid=$E2E_SRUN_PID job=$E2E_JOB
tasks=("$dir"/task-{0,1,2}.out)
mapfile -t cut_off < <(launcher_pids "$node")
((${#cut_off[@]} == 1)) || fail "expected one launcher on $node, found: ${cut_off[*]:-none}"

cut_off "$node"
rc=0
wait "$srun_pid" || rc=$?
e2e_log "srun ended ($rc); link of $node back up"
restore_link "$node"

out=$(cat -- "${tasks[@]}" 2>/dev/null)$'\n'$(cat "$log")
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (no heartbeat for 3 s); cancelling step $job.0 through Slurm"
assert_eq 1 "$(grep -cxF "$line" "$dir/task-0.out")" "rank 0's launcher cancels the step and says so"$'\n'"$out"
assert_eq 137 "$rc" "srun ends by itself: the cancel killed the remaining tasks"$'\n'"$out"

# After the heal: n3's launcher exits (its trainer was stopped when it lost the coordinator)
# and nothing of the step is left on any node.
for ((i = 0; i < 150; i++)); do
    kill -0 "${cut_off[0]}" 2>/dev/null || break
    sleep 0.2
done
! kill -0 "${cut_off[0]}" 2>/dev/null ||
    fail "the launcher on $node (pid ${cut_off[0]}) still runs 30 s after the heal"$'\n'"$out"
no_leftovers 30
e2e_log "PASS"
