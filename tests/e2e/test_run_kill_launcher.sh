#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A launcher killed with SIGKILL on one node (its trainer dies with it) is detected by the
# coordinator and the step ends: rank 0's launcher (the coordinator's host) prints that the
# rank's launcher was lost and cancels the step through Slurm (its node might be gone), srun
# exits 137 (a task killed by signal 9: the killed launcher's own status; the other launchers
# exit 8), and nothing is left on any node: its trainer's keeper removes its progress file.
#
# Each task writes to its own file (srun -o with %t: slurmstepd writes it on the node). Through
# srun's own stream the launchers' last lines can be lost: once a task has died by SIGKILL or
# SIGTERM, srun stops reading task output as soon as every task has exited (Slurm's
# slurm_step_launch_wait_finish), which can be before the other launchers' final lines arrive.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
log=$dir/srun.out
timeout -k 5 120 srun -N3 --ntasks-per-node=1 -o "$dir/task-%t.out" "$E2E_TFSLURM" run --ps 1 \
    --auth munge --grace 5 --heartbeat-timeout 5 -- "$E2E_TRAINER" --work-ms 60000 >"$log" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
tasks=("$dir"/task-{0,1,2}.out)
wait_for_lines "$k_trainer_listening" 3 60 "${tasks[@]}"

mapfile -t victims < <(launcher_pids n3)
((${#victims[@]} == 1)) || fail "expected one launcher on n3, found: ${victims[*]:-none}"
mapfile -t progress < <(progress_files n3)
((${#progress[@]} == 1)) || fail "expected one progress file on n3, found: ${progress[*]:-none}"
[[ -e ${progress[0]} ]] || fail "no progress file ${progress[0]}"
kill -KILL "${victims[0]}"
e2e_log "killed the launcher of n3 (pid ${victims[0]})"

rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "${tasks[@]}")$'\n'$(cat "$log")
assert_eq 137 "$rc" "srun reports the killed launcher's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (connection closed)"
assert_eq 1 "$(grep -cF "$line" "$dir/task-0.out")" "rank 0's launcher names the lost launcher"$'\n'"$out"
assert_eq 0 "$(grep -cF "$line" "$dir/task-1.out")" "one line per failure"$'\n'"$out"
# Its node may be gone (srun would wait for its tasks): rank 0 also ends the step through Slurm.
assert_contains "$(grep -F "$line" "$dir/task-0.out")" "; cancelling step " "rank 0 cancels the step"
assert_eq 0 "$(grep -c 'exiting with status 0' <<<"$out")" "workers stopped early"$'\n'"$out"
assert_contains "$(cat "$log")" "srun: error: n3: task 2: Killed" "srun reports the killed task"

no_leftovers 20
# The killed launcher could not remove its trainer's progress file: its keeper did.
[[ ! -e ${progress[0]} ]] || fail "the killed launcher's progress file is left: ${progress[0]}"
e2e_log "PASS"
