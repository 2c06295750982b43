#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `tfslurm env` learns every node's chosen address through Slurm's PMI2 (srun --mpi=pmi2): the
# first task of each node puts its node's ib0 address, every task fences and gets the others.
# Every rank's TF_CONFIG then names the ib0 addresses of all 3 nodes, over IPv4 and IPv6
# (fd78::/64 on the same ib0). Without --mpi=pmi2 Slurm hands each task a singleton PMI2:
# `--exchange pmi2` says to add --mpi=pmi2; auto falls back to this node's address alone.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm

# The TF_CONFIG lines of every rank, sorted by rank: "N: TF_CONFIG=...".
tf_lines() { grep -E '^[0-9]+: TF_CONFIG=' <<<"$E2E_OUTPUT" | sort -n | paste -sd'|'; }
# What every rank of `-N3 -n6` (block) prints, for a cluster list.
expected() {
    local cluster=$1 rank out=
    for rank in 0 1 2 3 4 5; do
        out+="${out:+|}$rank: TF_CONFIG={\"cluster\":{\"worker\":[$cluster]},\"task\":{\"type\":\"worker\",\"index\":$rank}}"
    done
    printf '%s' "$out"
}

v4='"10.78.0.11:23000","10.78.0.11:23001","10.78.0.12:23000","10.78.0.12:23001","10.78.0.13:23000","10.78.0.13:23001"'
run_stdout 0 60 srun --mpi=pmi2 -N3 -n6 -l "$E2E_TFSLURM" env --iface ib0 --exchange pmi2 \
    --port-base 23000 --only tf --format env
assert_eq "$(expected "$v4")" "$(tf_lines)" "every rank has every node's ib0 address (pmi2)"
assert_eq "0: NCCL_SOCKET_IFNAME=ib0" "$(grep '^0: NCCL' <<<"$E2E_OUTPUT")" "the socket variables"
assert_eq "" "$E2E_STDERR" "nothing on stderr"

# auto picks pmi2 when srun started a PMI2 server (PMI_FD), and says so at debug level.
run_stdout 0 60 srun --mpi=pmi2 -N3 -n6 -l "$E2E_TFSLURM" -v env --iface ib0 \
    --port-base 23000 --only tf --format env
assert_eq "$(expected "$v4")" "$(tf_lines)" "every rank has every node's ib0 address (auto)"
assert_eq "0: tfslurm: debug: exchange: pmi2 (asked for auto; iface/network set; PMI2 server present)" \
    "$(grep -E '^0: .*debug: exchange:' <<<"$E2E_STDERR")" "auto's choice is logged"

# JSON shows the same addresses (and the output stays clean: stdout is only the document).
run_stdout 0 60 srun --mpi=pmi2 -N3 -n3 -l "$E2E_TFSLURM" env --iface ib0 --exchange pmi2 \
    --port-base 23000 --only servers --format json
assert_eq 3 "$(grep -c '10.78.0.11:23000.*10.78.0.12:23000.*10.78.0.13:23000' <<<"$E2E_OUTPUT")" \
    "every rank's JSON names the three ib0 addresses"$'\n'"$E2E_OUTPUT"

# IPv6: the ULA of each node's ib0, written [addr]:port.
v6='"[fd78::11]:23000","[fd78::11]:23001","[fd78::12]:23000","[fd78::12]:23001","[fd78::13]:23000","[fd78::13]:23001"'
run_stdout 0 60 srun --mpi=pmi2 -N3 -n6 -l "$E2E_TFSLURM" env --network fd78::/64 \
    --exchange pmi2 --port-base 23000 --only tf --format env
assert_eq "$(expected "$v6")" "$(tf_lines)" "every rank has every node's IPv6 address"

# A node without the address asked for fails, and so does everyone else, at once: its task
# still takes part in the fence (with a marker) instead of leaving the others waiting.
assert_status 2 run_bounded 60 srun --mpi=pmi2 -N3 -n3 -l "$E2E_TFSLURM" env \
    --network 10.78.0.11/32 --exchange pmi2
assert_eq '0: tfslurm: error: PMI2: n2 chose no address (its task says why): "n2 -"' \
    "$(grep '^0: tfslurm: error' <<<"$E2E_OUTPUT")" "the others learn it through PMI2"
assert_contains "$(grep '^1: tfslurm: error' <<<"$E2E_OUTPUT")" \
    '1: tfslurm: error: --network: node n2 has no address in 10.78.0.11/32 (its interfaces:' \
    "the node says why"

# Without --mpi=pmi2: the singleton is refused with what to do (exit status 5).
assert_status 5 run_bounded 60 srun --mpi=none -N3 -n6 -l "$E2E_TFSLURM" env --iface ib0 --exchange pmi2
assert_eq "0: tfslurm: error: --exchange pmi2: PMI2 sees 1 task (a singleton), the step has 6: this step was not started with srun --mpi=pmi2|0: tfslurm: hint: run the step with srun --mpi=pmi2 (or set MpiDefault=pmi2 in slurm.conf)" \
    "$(grep '^0: ' <<<"$E2E_OUTPUT" | paste -sd'|')" "the singleton error"
assert_eq 6 "$(grep -c ': tfslurm: error: --exchange pmi2: PMI2 sees 1 task' <<<"$E2E_OUTPUT")" \
    "every task says so"
# ... and auto, without a PMI2 server, knows only this node's address.
assert_status 2 run_bounded 60 srun --mpi=none -N2 -n2 -l "$E2E_TFSLURM" env --iface ib0
assert_eq "0: tfslurm: error: --iface: the chosen addresses of n2 are unknown here (each node reads only its own interfaces): \"ib0\"" \
    "$(grep '^0: tfslurm: error' <<<"$E2E_OUTPUT")" "auto without PMI2"

no_leftovers 20
e2e_log "PASS"
