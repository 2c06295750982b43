#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A launcher killed with SIGKILL on one node (its trainer dies with it) is detected by the
# coordinator and the step ends: the other launchers print that the rank's launcher was lost,
# srun exits non-zero, and nothing is left on any node.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=run_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/run_lib.sh"

log=$(make_tmpdir)/srun.out
timeout -k 5 120 srun -N3 --ntasks-per-node=1 "$TFSLURM_BIN" run --ps 1 --auth munge --grace 5 \
    --heartbeat-timeout 5 -- "$TFSLURM_TRAINER" --work-ms 60000 >"$log" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
wait_for_lines "$log" 'listening on' 3 60

mapfile -t victims < <(launcher_pids n3)
((${#victims[@]} == 1)) || fail "expected one launcher on n3, found: ${victims[*]:-none}"
kill -KILL "${victims[0]}"
e2e_log "killed the launcher of n3 (pid ${victims[0]})"

rc=0
wait "$srun_pid" || rc=$?
out=$(cat "$log")
((rc != 0 && rc != 124)) || fail "srun exit status $rc, expected a failure"$'\n'"$out"
assert_contains "$out" "aborting: rank 2 (worker:1) on n3 launcher lost" "the lost launcher is named"
assert_eq 0 "$(grep -c 'exiting with status 0' <<<"$out")" "workers stopped early"$'\n'"$out"

no_leftovers 20
e2e_log "PASS"
