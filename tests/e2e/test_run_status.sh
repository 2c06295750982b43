#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# srun's status is the culprit's when the failure is not a trainer's own exit (those are in
# test_run_failure.sh and test_run_kill_launcher.sh): a rank that never registers (137: rank 0
# cancels the step, for the rank's node may hang), a launcher that stops heartbeating (137, as
# lost), a trainer port held by another process on one node (7, with one line naming the port,
# the node and the way out). Each failure is told in one line.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# --- a rank that never registers: task 2 hangs before its launcher starts ---------------------
# (a node stuck in its prolog or on a file system). Its task would never end by itself: rank 0's
# launcher cancels the step once the others left, so srun ends (137: the cancel's SIGKILL) where
# it used to wait for n3. (Not run_bounded: its 124 would look like srun's own.)
rc=0
start=$SECONDS
# shellcheck disable=SC2016 # expanded by the task's bash
out=$(timeout -k 5 90 srun -N3 --ntasks-per-node=1 bash -c \
    'case $SLURM_PROCID in 1) echo "step $SLURM_JOB_ID.$SLURM_STEP_ID" ;; 2) exec sleep 300 ;; esac
     exec "$0" "$@"' "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 3 --connect-timeout 3 "$E2E_TRAINER" --work-ms 60000 2>&1) || rc=$?
((SECONDS - start < 85)) || fail "srun did not end by itself"$'\n'"$out"
step=$(sed -n 's/^step \([0-9]*\.[0-9]*\)$/\1/p' <<<"$out")
[[ -n $step ]] || fail "task 1 did not say its step"$'\n'"$out"
assert_eq 137 "$rc" "srun ends: the cancel killed the hung task"$'\n'"$out"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 did not register within 3 s;"
line+=" cancelling step $step through Slurm"
assert_eq 1 "$(grep -cxF "$line" <<<"$out")" "rank 0's launcher names the missing rank"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "one line per failure"$'\n'"$out"
e2e_log "registration timeout: srun status $rc"

# --- a launcher that stops heartbeating: SIGSTOP, then SIGCONT once the step aborted ----------
# Rank 0's launcher must end within its trainer's grace although the lost launcher never
# disconnects: it used to wait for the coordinator's linger time (--grace + --heartbeat-timeout
# + 2 s = 25 s here). The bound below is generous: its trainer stops at once.
timeout -k 5 120 srun -N3 --ntasks-per-node=1 -o "$dir/hb-%t.out" "$E2E_TFSLURM" run --ps 1 \
    --auth munge --grace 20 --heartbeat-timeout 3 "$E2E_TRAINER" --work-ms 60000 \
    >"$dir/hb-srun.out" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
wait_for_lines "$k_trainer_listening" 3 60 "$dir"/hb-{0,1,2}.out
mapfile -t victims < <(launcher_pids n3)
((${#victims[@]} == 1)) || fail "expected one launcher on n3, found: ${victims[*]:-none}"
kill -STOP "${victims[0]}"
on_exit "kill -CONT ${victims[0]} 2>/dev/null || true"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (no heartbeat for 3 s)"
wait_for_lines "$line" 1 30 "$dir/hb-0.out"
for ((i = 0; i < 150; i++)); do
    [[ -z $(launcher_pids n1) ]] && break
    sleep 0.1
done
[[ -z $(launcher_pids n1) ]] ||
    fail "rank 0's launcher still runs 15 s after the abort"$'\n'"$(cat -- "$dir"/hb-*.out)"
# rank 0 cancels the step through Slurm once rank 1 has left: the stopped launcher may already
# be gone.
kill -CONT "${victims[0]}" 2>/dev/null || true
rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "$dir"/hb-{0,1,2}.out "$dir/hb-srun.out")
# The silent launcher is alive, so rank 0 cancels the step through Slurm, whose SIGKILL ends
# that task: srun reports the killed task (128 + 9), the others exit 8.
assert_eq 137 "$rc" "srun reports the cancelled step's killed task"$'\n'"$out"
assert_contains "$out" "cancelling step " "rank 0 cancels the step through Slurm"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "one line names the silent launcher"$'\n'"$out"
assert_eq 0 "$(grep -cF 'tfslurm: error' "$dir/hb-1.out")" "rank 1 says nothing"$'\n'"$out"
e2e_log "heartbeat timeout: srun status $rc"

# --- a trainer port held on n2 ------------------------------------------------------------------
# With --port-base 23000 and one task per node, every trainer listens on 23000 (the control
# endpoint is n1:23001): hold 23000 on n2 only, for at most 60 s.
timeout -k 5 60 "$E2E_TEST_CLUSTER" node n2 python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", 23000))
s.listen()
open(sys.argv[1], "w").write("ready\n")
time.sleep(60)
' "$dir/holder.ready" &
holder=$!
on_exit "kill $holder 2>/dev/null || true"
wait_for_lines ready 1 20 "$dir/holder.ready"
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 3 --port-base 23000 "$E2E_TRAINER" --work-ms 60000 2>&1) || rc=$?
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
assert_eq 7 "$rc" "srun reports the port error's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 1 (worker:0) on n2 could not start its trainer: trainer: port"
line+=" 23000 is already in use on n2: another process holds it; choose other ports with"
line+=" --port-base, or let Slurm reserve them with srun --resv-ports (MpiParams=ports=... in"
line+=" slurm.conf)"
assert_eq 1 "$(grep -cxF "$line" <<<"$out")" "one line names the port and the node"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "one line per failure"$'\n'"$out"
e2e_log "port held on n2: srun status $rc"

no_leftovers 20
e2e_log "PASS"
