#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The control port's defences against a hostile client of ANOTHER user (nobody) on a node, with
# Debian's /usr/bin/python3 (hostile_client.py), each under a timeout:
#   (a) flood: 3,000 connections that never say hello, held open (and reopened when closed) from
#       n2, while rank 1 on n2 starts its launcher late: the late rank registers, the job ends 0
#       (HandshakePool: 256 unauthenticated connections per address, 1024 + ranks in all, the
#       oldest closed first);
#   (b) quoting: hellos whose host carries a newline and a forged `tfslurm: error: aborting:`
#       line, terminal escapes and bytes that are not UTF-8: the job's log has no forged line,
#       no escape byte, stays valid UTF-8 and shows the value quoted;
#   (c) noise: a client opening connections that time out for 6 s: 10 warning lines (LogBudget:
#       10 per 10 s) and one summary line that counts the rest.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
# The hostile user's directory: its script and the files it writes.
hdir=$(hostile_client_dir "$dir" hostile)

# --- (a) a flood of connections while a late rank registers --------------------------------------
# Rank 1 starts its launcher only once the flood is in place (and 2 s later).
# shellcheck disable=SC2016 # expanded by the task's shell
late='if [[ $SLURM_PROCID == 1 ]]; then
    for ((i = 0; i < 600; i++)); do [[ -s $0/flooding ]] && break; sleep 0.1; done
    sleep 2
fi
exec "$1" run --auth munge --port-base 23300 -- "$2" --work-ms 200'
timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=1 -o "$dir/flood.out" bash -c "$late" "$hdir" \
    "$E2E_TFSLURM" "$E2E_TRAINER" >"$dir/flood.srun" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
# The flood waits for rank 0's coordinator (control port 23301 on n1), then holds 3,000
# connections for 20 s.
hostile_client "$hdir" n2 90 flood n1 23301 3000 20 "$hdir/flooding" >"$dir/flood.client" 2>&1 &
flood_pid=$!
on_exit "kill $flood_pid 2>/dev/null || true"
rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "$dir/flood.out" "$dir/flood.srun")
assert_eq 0 "$rc" "the job with a late rank under a flood ends 0"$'\n'"$out"
assert_eq "flooding 3000" "$(cat -- "$hdir/flooding" 2>/dev/null)" "the flood was in place"
assert_eq 2 "$(grep -c 'exiting with status 0' <<<"$out")" "both trainers ran"$'\n'"$out"
assert_eq 0 "$(grep -c '^tfslurm: error' <<<"$out" || true)" "no error"$'\n'"$out"
assert_contains "$out" "tfslurm: warning: coordinator: closing connection from 10.77.0.12:" \
    "the flood's connections are closed"
rc=0
wait "$flood_pid" || rc=$?
assert_eq 0 "$rc" "the flood client ran to its end"$'\n'"$(cat -- "$dir/flood.client")"
e2e_log "flood of 3000 connections of nobody: the late rank registered, status 0"

# --- (b) peer text is quoted ---------------------------------------------------------------------
# Each trainer notes that it started (its launcher registered), then waits for "go": the
# forged hello for rank 1 comes once both ranks are registered (a trainer starts after its own
# rank's registration, not after the others').
# shellcheck disable=SC2016 # expanded by the task's shell
wait_go='printf "%s\n" "$SLURM_JOB_ID" >"$0/job"
touch "$0/started-$SLURM_PROCID"
for ((i = 0; i < 600; i++)); do [[ -e $0/go ]] && break; sleep 0.1; done
exec "$@"'
timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=1 -o "$dir/forge.out" "$E2E_TFSLURM" run --auth munge \
    --port-base 23400 -- bash -c "$wait_go" "$dir" "$E2E_TRAINER" --work-ms 200 \
    >"$dir/forge.srun" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
for ((i = 0; i < 600; i++)); do
    [[ -e $dir/started-0 && -e $dir/started-1 ]] && break
    sleep 0.1
done
[[ -e $dir/started-1 && -e $dir/started-0 ]] ||
    fail "the trainers did not start within 60 s:"$'\n'"$(cat -- "$dir"/forge.*)"
job=$(<"$dir/job")
assert_eq "forged 2" "$(hostile_client "$hdir" n2 60 forge n1 23401 "$job" 0 2>&1)" "the forging client"
touch "$dir/go"
rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "$dir/forge.out" "$dir/forge.srun")
assert_eq 0 "$rc" "the job ends 0"$'\n'"$out"
assert_eq 0 "$(grep -c '^tfslurm: error: aborting: forged' <<<"$out" || true)" \
    "no forged line"$'\n'"$out"
assert_eq 0 "$(grep -c $'\x1b' <<<"$out" || true)" "no escape byte in the log"
iconv -f UTF-8 -t UTF-8 <<<"$out" >/dev/null || fail "the log is not valid UTF-8"
# shellcheck disable=SC2016 # literal backslashes
# Rank 1 is registered by then: the cheap check refuses the hello before its proof is read.
assert_contains "$out" '(pid 4242 on "n2\ntfslurm: error: aborting: forged\x1b[2J\x1b]0;owned\x07"): rank 1 is already registered' \
    "the JSON-escaped host, quoted"
# shellcheck disable=SC2016 # literal backslashes
assert_contains "$out" '"{\"host\":\"n2\ntfslurm: error: aborting: forged\x1b[31m\xff\xfe\xc3(\",' \
    "the raw host (not UTF-8), quoted in the protocol error"
e2e_log "forged host of nobody: quoted"

# --- (c) noise is bounded ------------------------------------------------------------------------
# Every trainer waits for the coordinator's summary line before it ends.
# shellcheck disable=SC2016 # expanded by the task's shell
wait_summary='for ((i = 0; i < 600; i++)); do grep -q "more warnings about connections" "$0" && break; sleep 0.1; done
exec "$@"'
timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=1 -o "$dir/noise.out" "$E2E_TFSLURM" run --auth munge \
    --port-base 23500 --connect-timeout 3 -- bash -c "$wait_summary" "$dir/noise.out" \
    "$E2E_TRAINER" --work-ms 200 >"$dir/noise.srun" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
noise=$(hostile_client "$hdir" n2 60 noise n1 23501 40 6 2>&1) || fail "the noise client failed: $noise"
[[ $noise =~ ^opened\ ([0-9]+)$ ]] || fail "the noise client: $noise"
opened=${BASH_REMATCH[1]}
rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "$dir/noise.out" "$dir/noise.srun")
assert_eq 0 "$rc" "the job ends 0"$'\n'"$out"
timeouts=$(grep -c '^tfslurm: warning: coordinator: closing connection from 10\.77\.0\.12:[0-9]*: no hello within 3 s$' <<<"$out" || true)
assert_eq 10 "$timeouts" "10 warning lines (10 per 10 s)"$'\n'"$out"
assert_eq "tfslurm: warning: coordinator: $((opened - 10)) more warnings about connections without a valid hello in the last 10 s (not shown)" \
    "$(grep 'more warnings about connections' <<<"$out")" "one summary of the $opened timeouts"
assert_eq 11 "$(grep -c '^tfslurm: warning: coordinator:' <<<"$out")" \
    "no other coordinator warning"$'\n'"$out"
e2e_log "noise of $opened connections: 10 warnings and a summary"

no_leftovers 20
e2e_log "PASS"
