#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A held control port does not stop a step: rank 0's coordinator listens on the next candidate
# and every launcher finds it there. (1) A silent listener on n1 holds the control port derived
# for the next job (the ports of jobs whose windows collide). (2) Two concurrent jobs with the
# same ports: the second job's launchers meet the first job's coordinator, are rejected for the
# wrong job, and register with their own.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

# --- (1) the next job's derived control port is held on n1 --------------------------------------
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 30 srun -N1 bash -c 'echo "$SLURM_JOB_ID"'
job=$((E2E_OUTPUT + 1))
run_stdout 0 10 "$E2E_TFSLURM" plan --nodelist 'n[1-2]' --tasks-per-node 1 --job-id "$job" \
    --step-id 0 --json
control=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["control"]["port"])' \
    <<<"$E2E_OUTPUT")
# A listener that never accepts: launchers connect into its backlog and hear nothing.
timeout -k 5 60 "$E2E_TEST_CLUSTER" node n1 python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", int(sys.argv[2])))
s.listen()
open(sys.argv[1], "w").write("ready\n")
time.sleep(60)' "$dir/held" "$control" &
holder=$!
on_exit "kill $holder 2>/dev/null || true"
wait_for_lines ready 1 20 "$dir/held"
rc=0
# shellcheck disable=SC2016 # expanded by the task's shell
# (The test cluster's MpiParams=ports makes Slurm reserve ports for every step: unset them so
# that the ports are the derived ones.)
out=$(run_bounded 60 srun -N2 -w n1,n2 --ntasks-per-node=1 env -u SLURM_STEP_RESV_PORTS \
    "$E2E_TFSLURM" run -v --auth munge -- \
    bash -c 'echo "job $SLURM_JOB_ID rank $SLURM_PROCID"' 2>&1) || rc=$?
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
assert_eq 0 "$rc" "the step succeeds with its control port held"$'\n'"$out"
assert_contains "$out" "job $job rank 1" "the step is the job whose port was held"
fallback=$(sed -n "s/^tfslurm: warning: coordinator: cannot listen on 0\.0\.0\.0:$control (Address already in use): listening on fallback port \([0-9]*\) (1 of 7)$/\1/p" <<<"$out")
[[ -n $fallback ]] || fail "rank 0 names the fallback port"$'\n'"$out"
assert_contains "$out" "rank 1 (worker:1): n1:$control: no challenge within 2 s; trying n1:$fallback" \
    "rank 1 leaves the silent listener"
assert_contains "$out" "rank 1 (worker:1): coordinator at n1:$fallback" \
    "rank 1 registers with its own coordinator"
e2e_log "job $job: control port $control held, coordinator on $fallback"

# --- (2) two jobs at once on the same ports -----------------------------------------------------
# The first job's trainers run until the second job has ended (a file, not a time: on a busy
# machine the second srun may take seconds to start).
# shellcheck disable=SC2016 # expanded by the task's shell
timeout -k 5 60 srun -N2 -w n1,n2 --ntasks-per-node=1 "$E2E_TFSLURM" run -v --auth munge \
    --port-base 23100 -- bash -c 'until [[ -e $1 ]]; do sleep 0.1; done' _ "$dir/b.done" \
    >"$dir/a.out" 2>&1 &
a=$!
on_exit "kill $a 2>/dev/null || true"
wait_for_lines 'coordinator: listening on 0.0.0.0:23101' 1 30 "$dir/a.out"
b_rc=0
b_out=$(run_bounded 60 srun -N2 -w n1,n2 --ntasks-per-node=1 "$E2E_TFSLURM" run -v --auth munge \
    --port-base 23100 -- true 2>&1) || b_rc=$?
: >"$dir/b.done"
a_rc=0
wait "$a" || a_rc=$?
a_out=$(cat -- "$dir/a.out")
assert_eq 0 "$a_rc" "the first job is undisturbed"$'\n'"$a_out"
assert_eq 0 "$b_rc" "the second job succeeds on a fallback port"$'\n'"$b_out"
fallback=$(sed -n 's/^tfslurm: warning: coordinator: cannot listen on 0\.0\.0\.0:23101 (Address already in use): listening on fallback port \([0-9]*\) (1 of 7)$/\1/p' <<<"$b_out")
[[ -n $fallback ]] || fail "the second job's rank 0 names its fallback port"$'\n'"$b_out"
assert_contains "$b_out" "rank 1 (worker:1): coordinator at n1:$fallback" \
    "the second job's rank 1 registers with its own coordinator"
assert_contains "$a_out" "tfslurm: warning: coordinator: rejected rank 1 from " \
    "the first job's coordinator turns the stranger away"
assert_contains "$a_out" ": wrong job " "for the wrong job"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$a_out$b_out" || true)" "no error"$'\n'"$a_out$b_out"
e2e_log "two jobs on port base 23100: the second's coordinator on $fallback"

no_leftovers 20
e2e_log "PASS"
