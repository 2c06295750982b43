#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# --iface on the real cluster: every node has an ib0 on a second network (10.78.0.0/24, no DNS
# name; scripts/test-cluster). `tfslurm run --iface ib0` exchanges the nodes' ib0 addresses
# through the coordinator: TF_CONFIG names them, the frameworks' socket variables name ib0, and
# the trainers really connect over them (each worker to the ps, across nodes). A missing
# interface is an error naming the node and its interfaces; `tfslurm env` works on one node and
# says that several need `tfslurm run`.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# IPv6 addresses (::1, link-local ones from random MACs, none where IPv6 is off) are dropped
# for exact comparisons.
normalise() { sed -E 's/ (::1|fe80::[0-9a-f:]+)//g'; }

# TF_CONFIG and the socket variables each trainer sees (fixed ports: exact lines).
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=1 \
    "$E2E_TFSLURM" run --iface ib0 --port-base 23000 --auth munge -- \
    bash -c 'echo "tf $SLURM_PROCID $TF_CONFIG $MASTER_ADDR $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME $TP_SOCKET_IFNAME"'
cluster='{"cluster":{"worker":["10.78.0.11:23000","10.78.0.12:23000","10.78.0.13:23000"]}'
assert_eq "tf 0 $cluster,\"task\":{\"type\":\"worker\",\"index\":0}} 10.78.0.11 ib0 ib0 ib0|tf 1 $cluster,\"task\":{\"type\":\"worker\",\"index\":1}} 10.78.0.11 ib0 ib0 ib0|tf 2 $cluster,\"task\":{\"type\":\"worker\",\"index\":2}} 10.78.0.11 ib0 ib0 ib0" \
    "$(grep '^tf ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "trainers' TF_CONFIG over ib0"

# A user's own NCCL_SOCKET_IFNAME is kept.
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 env NCCL_SOCKET_IFNAME=eth0 srun -N2 --ntasks-per-node=1 \
    "$E2E_TFSLURM" run --network 10.78.0.0/24 --port-base 23000 --auth munge -- \
    bash -c 'echo "sock $SLURM_PROCID $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
assert_eq "sock 0 ib0 eth0|sock 1 ib0 eth0" "$(grep '^sock ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" \
    "the user's NCCL_SOCKET_IFNAME"

# The test trainer: every worker connects to the ps at its TF_CONFIG address, which only ib0
# carries (the node names resolve to eth0's 10.77.0.x).
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=1 --resv-ports=2 \
    "$E2E_TFSLURM" run --ps 1 --iface ib0 --auth munge --grace 5 -- \
    "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
assert_eq 2 "$(grep -cE 'exchanged with ps:0 at 10\.78\.0\.11:[0-9]+$' <<<"$out")" \
    "workers that exchanged with the ps over ib0"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"

# No such interface: the node says what it has.
assert_status 2 run_bounded 60 srun -N1 -w n2 -n1 \
    "$E2E_TFSLURM" run --iface nosuch0 --auth munge -- true
assert_eq 'tfslurm: error: --iface: node n2 has no address on nosuch0 (its interfaces: lo 127.0.0.1, eth0 10.77.0.12, ib0 10.78.0.12 fd78::12): "nosuch0"' \
    "$(grep '^tfslurm: error' <<<"$E2E_OUTPUT" | normalise)" "the missing interface"

# tfslurm env: one node works; several need the exchange of tfslurm run.
run_stdout 0 60 srun -N1 -w n3 -n2 -l "$E2E_TFSLURM" env --iface ib0 --port-base 23000 --only tf --format env
assert_eq '0: TF_CONFIG={"cluster":{"worker":["10.78.0.13:23000","10.78.0.13:23001"]},"task":{"type":"worker","index":0}}' \
    "$(grep '^0: TF_CONFIG' <<<"$E2E_OUTPUT")" "env on one node"
assert_eq "0: NCCL_SOCKET_IFNAME=ib0" "$(grep '^0: NCCL' <<<"$E2E_OUTPUT")" "env's socket variables"
assert_status 2 run_bounded 60 srun -N2 -n2 -l "$E2E_TFSLURM" env --iface ib0
assert_eq "0: tfslurm: error: --iface: the chosen addresses of n2 are unknown here (each node reads only its own interfaces): \"ib0\"" \
    "$(grep '^0: tfslurm: error' <<<"$E2E_OUTPUT")" "env across nodes"

no_leftovers 20
e2e_log "PASS"
