#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# IPv6 end to end through `tfslurm run --network fd78::/64`: every node's ib0 also carries a
# ULA (fd78::11..13, scripts/test-cluster), the coordinator exchanges them, TF_CONFIG names
# them as [addr]:port, and the trainers really connect over them: worker 0 listens on its
# TF_CONFIG endpoint (IPv6 only), the other workers connect to it and exchange a line.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm

dir=$(make_tmpdir)
cat >"$dir/v6_trainer.py" <<'PY'
import json, os, socket, sys, time

spec = json.loads(os.environ["TF_CONFIG"])
workers = spec["cluster"]["worker"]
me = spec["task"]["index"]
host, port = workers[0].rsplit(":", 1)
host = host.strip("[]")
if me == 0:
    server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, int(port)))
    server.listen()
    server.settimeout(60)
    for _ in range(len(workers) - 1):
        conn, peer = server.accept()
        with conn:
            line = conn.makefile().readline().strip()
            print(f"v6 worker 0 heard '{line}' from {peer[0]}", flush=True)
            conn.sendall(b"ack\n")
    sys.exit(0)
deadline = time.monotonic() + 60
while True:
    try:
        conn = socket.create_connection((host, int(port)), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
with conn:
    conn.sendall(f"worker {me}\n".encode())
    reply = conn.makefile().readline().strip()
    print(f"v6 worker {me} reached {workers[0]} from {conn.getsockname()[0]}: {reply}", flush=True)
PY

# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=1 \
    "$E2E_TFSLURM" run --network fd78::/64 --port-base 23000 --auth munge -- \
    bash -c 'echo "tf $SLURM_PROCID $TF_CONFIG $GLOO_SOCKET_IFNAME"; exec /usr/bin/python3 "$0"' "$dir/v6_trainer.py"
out=$E2E_OUTPUT
cluster='{"cluster":{"worker":["[fd78::11]:23000","[fd78::12]:23000","[fd78::13]:23000"]}'
assert_eq "tf 0 $cluster,\"task\":{\"type\":\"worker\",\"index\":0}} ib0|tf 1 $cluster,\"task\":{\"type\":\"worker\",\"index\":1}} ib0|tf 2 $cluster,\"task\":{\"type\":\"worker\",\"index\":2}} ib0" \
    "$(grep '^tf ' <<<"$out" | sort | paste -sd'|')" "TF_CONFIG over IPv6"$'\n'"$out"
assert_eq "v6 worker 0 heard 'worker 1' from fd78::12|v6 worker 0 heard 'worker 2' from fd78::13|v6 worker 1 reached [fd78::11]:23000 from fd78::12: ack|v6 worker 2 reached [fd78::11]:23000 from fd78::13: ack" \
    "$(grep '^v6 ' <<<"$out" | sort | paste -sd'|')" "the trainers connected over IPv6"$'\n'"$out"

no_leftovers 20
e2e_log "PASS"
