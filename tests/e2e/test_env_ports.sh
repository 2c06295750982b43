#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Two jobs sharing the same nodes at once do not collide on ports: every task of both jobs
# binds and listens on the port its TF_CONFIG gives it, at the same time. Also with Slurm's
# reserved ports (srun --resv-ports), which tfslurm prefers when present.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

# Each task: bind its own host:port from TF_CONFIG, hold it for 4 s, print "host:port ok".
cat >"$dir/bind.py" <<'PY'
import json, os, socket, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
own = config["cluster"][task["type"]][task["index"]]
host, port = own.rsplit(":", 1)
s = socket.socket()
try:
    s.bind(("0.0.0.0", int(port)))
    s.listen()
except OSError as e:
    print(f"{own} bind failed: {e}", flush=True)
    sys.exit(3)
print(f"{own} ok", flush=True)
time.sleep(4)
PY
# shellcheck disable=SC2016 # expanded by the task's shell, not here
task='eval "$("$E2E_TFSLURM" env --format export --only tf)"; exec python3 '"$dir/bind.py"
# The test cluster sets MpiParams=ports, so Slurm reserves ports even without --resv-ports:
# the derived case drops them to test tfslurm's own derivation.
# shellcheck disable=SC2016 # expanded by the task's shell, not here
derived_task='unset SLURM_STEP_RESV_PORTS; '"$task"

run_pair() {
    local label=$1 command=$2 a_rc=0 b_rc=0
    shift 2
    timeout -k 5 60 srun -N3 --ntasks-per-node=1 "$@" bash -c "$command" >"$dir/$label.a" 2>&1 &
    local a=$!
    timeout -k 5 60 srun -N3 --ntasks-per-node=1 "$@" bash -c "$command" >"$dir/$label.b" 2>&1 &
    local b=$!
    wait "$a" || a_rc=$?
    wait "$b" || b_rc=$?
    assert_eq 0 "$a_rc" "$label: first job: $(cat "$dir/$label.a")"
    assert_eq 0 "$b_rc" "$label: second job: $(cat "$dir/$label.b")"
    # Both jobs really overlapped on the same nodes and used different ports.
    local ports_a ports_b
    ports_a=$(sed -n 's/^.*:\([0-9]*\) ok$/\1/p' "$dir/$label.a" | sort -u | tr '\n' ' ')
    ports_b=$(sed -n 's/^.*:\([0-9]*\) ok$/\1/p' "$dir/$label.b" | sort -u | tr '\n' ' ')
    [[ -n $ports_a && -n $ports_b && $ports_a != "$ports_b" ]] ||
        fail "$label: expected different ports, got '$ports_a' and '$ports_b'"
    e2e_log "$label: job A ports $ports_a, job B ports $ports_b"
}

run_pair derived "$derived_task"
run_pair reserved "$task" --resv-ports=2

no_leftovers 20
e2e_log "PASS"
