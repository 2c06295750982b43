#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Exact mode's bound ports on the real cluster: a trainer port held by another process on n2.
# (1) With --iface ib0 the launcher of n2 binds another port of its pool, reports it, and the
# workers really connect to the ps there over ib0. (2) Without exact mode the same step fails
# with the held-port error. (3) Two concurrent exact-mode jobs with the same ports on the same
# nodes both succeed. (4) With the tree (two tasks per node) the held port is a follower's: its
# moved port travels up through its node leader's relay and reaches every rank.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# --port-base 23000 --port-range 23000-23009 with one task per node: every trainer's planned
# port is 23000, the control port 23001. The ps is rank 1, on n2, where 23000 is held: its
# launcher skips 23000 (held) and 23001 (a control port candidate) and binds 23002.
# hold_port PORT NAME: a process on n2 holds PORT (listening, for at most 90 s) until killed; its
# pid is in $holder.
hold_port() {
    timeout -k 5 90 "$E2E_TEST_CLUSTER" node n2 python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", int(sys.argv[2])))
s.listen()
open(sys.argv[1], "w").write("ready\n")
time.sleep(90)
' "$dir/$2.ready" "$1" &
    holder=$!
    on_exit "kill $holder 2>/dev/null || true"
    wait_for_lines ready 1 20 "$dir/$2.ready"
}
hold_port 23000 holder

# --- (1) exact mode moves the rank whose port is held -------------------------------------------
# (Slurm reserves ports for every step on the test cluster (MpiParams=ports): unset them so that
# the pool is --port-range.)
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=1 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run --roles worker,ps,worker --iface ib0 --port-base 23000 \
    --port-range 23000-23009 --auth munge --grace 5 -- "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
assert_eq 1 "$(grep -cxF 'tf_trainer[ps:0 rank=1]: listening on 10.78.0.12:23002' <<<"$out")" \
    "the ps listens on the port its launcher bound"$'\n'"$out"
assert_eq 2 "$(grep -cE '^tf_trainer\[worker:[01] rank=[02]\]: exchanged with ps:0 at 10\.78\.0\.12:23002$' <<<"$out")" \
    "both workers reach the ps at the exchanged port"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"
e2e_log "exact mode: the ps on n2 moved to 23002"

# --- (2) the default mode fails with the held-port error ----------------------------------------
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run --roles worker,ps,worker --port-base 23000 --auth munge --grace 3 -- \
    "$E2E_TRAINER" --work-ms 300 2>&1) || rc=$?
assert_eq 7 "$rc" "srun reports the port error's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 1 (ps:0) on n2 could not start its trainer: trainer: port"
line+=" 23000 is already in use on n2: another process holds it; choose other ports with"
line+=" --port-base, or let Slurm reserve them with srun --resv-ports (MpiParams=ports=... in"
line+=" slurm.conf)"
assert_eq 1 "$(grep -cxF "$line" <<<"$out")" "one line names the port and the node"$'\n'"$out"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
e2e_log "default mode: the held port fails the step"

# --- (3) two exact-mode jobs at once, same ports, same nodes ------------------------------------
# The first job's trainers hold 23000 on every node until the second job has ended (a file, not
# a time: on a busy machine the second srun may take seconds to start): the second job's
# launchers bind other ports (and its coordinator a fallback control port).
timeout -k 5 90 srun -N3 --ntasks-per-node=1 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run --ps 1 --iface ib0 --port-base 23000 --auth munge --grace 5 -- \
    "$E2E_TRAINER" --until-file "$dir/b.done" >"$dir/a.out" 2>&1 &
a=$!
on_exit "kill $a 2>/dev/null || true"
wait_for_lines 'listening on 10\.78\.0\.1[123]:23000' 3 60 "$dir/a.out"
b_rc=0
b_out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run --ps 1 --iface ib0 --port-base 23000 --auth munge --grace 5 -- \
    "$E2E_TRAINER" --work-ms 300 2>&1) || b_rc=$?
: >"$dir/b.done"
a_rc=0
wait "$a" || a_rc=$?
a_out=$(cat -- "$dir/a.out")
assert_eq 0 "$a_rc" "the first job succeeds"$'\n'"$a_out"
assert_eq 0 "$b_rc" "the second job succeeds"$'\n'"$b_out"
assert_eq 2 "$(grep -cE 'exchanged with ps:0 at 10\.78\.0\.11:23000$' <<<"$a_out")" \
    "the first job's workers reach its ps on the planned port"$'\n'"$a_out"
assert_eq 2 "$(grep -cE 'exchanged with ps:0 at 10\.78\.0\.11:230(0[2-9]|[1-9][0-9])$' <<<"$b_out")" \
    "the second job's workers reach its ps on a moved port"$'\n'"$b_out"
e2e_log "two exact-mode jobs on port base 23000"

# --- (4) the tree: a follower's moved port reaches every rank -----------------------------------
# Two tasks per node, the ps last: rank 3 (ps:0) follows rank 2, n2's leader. Its planned port,
# 23001, is held on n2: it binds 23003 (23002 is the control port) and says so in its hello, which
# rank 2's relay carries up; the coordinator's `cluster` names the moved port to every rank.
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
hold_port 23001 follower-holder
assert_status 0 run_bounded 120 srun -N2 --ntasks-per-node=2 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run --roles worker,worker,worker,ps --iface ib0 --port-base 23000 \
    --port-range 23000-23009 --auth munge --grace 5 -- "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
assert_eq 1 "$(grep -cxF 'tf_trainer[ps:0 rank=3]: listening on 10.78.0.12:23003' <<<"$out")" \
    "the follower ps listens on the port its launcher bound"$'\n'"$out"
assert_eq 3 "$(grep -cE '^tf_trainer\[worker:[0-2] rank=[0-2]\]: exchanged with ps:0 at 10\.78\.0\.12:23003$' <<<"$out")" \
    "every worker reaches the follower ps at its moved port"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"
kill "$holder" 2>/dev/null || true
e2e_log "exact mode with the tree: the follower ps on n2 moved to 23003, and every rank knew"

no_leftovers 20
e2e_log "PASS"
