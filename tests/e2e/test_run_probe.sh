#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# --probe on the real cluster: before any trainer starts, every launcher listens on its
# trainer's port and connects to its peers' trainer addresses. Over ib0 (10.78.0.0/24) with
# nothing in the way the step runs as usual; with n3 cut off from the ib0 network (a more
# specific `unreachable` route inside n3's namespace: n3's own connections fail at once with
# "No route to host", and its answers to the others are dropped, so their attempts time out;
# ARP still works, so the errors do not depend on the neighbour cache) the step aborts within
# the probe timeout, no trainer starts, and rank 0's launcher names the pair. The route is
# removed even when the test fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

netns=/run/netns/${TC_NS_PREFIX}n3
cut_route=(unreachable "$TC_IB_NET.0/25")
heal() { nsenter --net="$netns" -- ip route del "${cut_route[@]}" 2>/dev/null || true; }
on_exit heal

# Reachable: both with the exchanged ib0 addresses and with node names.
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=1 \
    "$E2E_TFSLURM" run --iface ib0 --probe --port-base 23000 --auth munge -- \
    bash -c 'echo "started $SLURM_PROCID"'
assert_eq "started 0|started 1|started 2" \
    "$(grep '^started ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "trainers after the probe over ib0"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$E2E_OUTPUT")" "no error"$'\n'"$E2E_OUTPUT"
# Each task prints, then waits until all 6 have printed (a marker file per rank): the workers'
# exit stops the ps, which must not happen before it printed.
barrier=$(make_tmpdir)
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=2 \
    "$E2E_TFSLURM" run --ps 1 --probe --auth munge -- bash -c 'echo "started $SLURM_PROCID"
touch "$0/$SLURM_PROCID"; while (($(ls "$0" | wc -l) < SLURM_NTASKS)); do sleep 0.1; done' "$barrier"
assert_eq 6 "$(grep -c '^started ' <<<"$E2E_OUTPUT")" "trainers after the probe by node names"

# n3 cut off from ib0: the probe fails within --probe-timeout and names the pair.
nsenter --net="$netns" -- ip route add "${cut_route[@]}"
e2e_log "n3 cut off from $TC_IB_NET.0/24"
start=$SECONDS
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 12 run_bounded 60 srun -N3 --ntasks-per-node=1 \
    "$E2E_TFSLURM" run --iface ib0 --probe --probe-timeout 4 --port-base 23000 --auth munge -- \
    bash -c 'echo "started $SLURM_PROCID"'
elapsed=$((SECONDS - start))
heal
out=$E2E_OUTPUT
assert_eq "tfslurm: error: aborting: rank 0 (worker:0) on n1 cannot reach rank 2 (worker:2) at 10.78.0.13:23000: Connection timed out" \
    "$(grep '^tfslurm: error' <<<"$out")" "the unreachable pair"$'\n'"$out"
assert_eq 0 "$(grep -c '^started ' <<<"$out")" "no trainer started"$'\n'"$out"
((elapsed < 30)) || fail "the probe took ${elapsed} s with --probe-timeout 4"

no_leftovers 20
e2e_log "PASS"
