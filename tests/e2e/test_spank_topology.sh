#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The SPANK plugin in a step that Slurm laid out in topology order. On the test cluster of 26.05,
# `srun -p topo -N3 -n6` puts ranks 0,1 on n3, 2,3 on n1 and 4,5 on n2 while every variable
# stays in name order (test_env_topology.sh). The plugin, in slurmstepd, never asks the
# controller for the layout (tfslurm env and run do): every task of such a step fails before
# its program starts, with the same line naming the topology, and no node is drained. Cyclic
# steps, which Slurm keeps in name order, get their TF_CONFIG. Releases without topology.yaml
# (22.05, 24.11) have no "topo" partition: there the same block step is in name order, and the
# plugin places it so.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin
spank_install enabled=option

if [[ $TC_SLURM == 22.05 || $TC_SLURM == 24.11 ]]; then
    e2e_log "Slurm $TC_SLURM reads no topology.yaml: block is name order, and the plugin places it so"
    run_stdout 0 60 srun -N3 -n6 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
    check_tf_configs "$E2E_OUTPUT" 6 1
    assert_eq "0 n1 1 n1 2 n2 3 n2 4 n3 5 n3" \
        "$(sort -n <<<"$E2E_OUTPUT" | cut -d' ' -f1,2 | paste -sd' ')" "ranks of the block step"
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi

e2e_log "every task of the block step in partition topo fails with the same line"
topology="topology \"tree\" (tree) of partition topo in $TC_DIR/etc/topology.yaml"
line="tfslurm: placement: Slurm lays a block distribution over several nodes out in the order of the network topology ($topology), which no task's environment shows: \"block\" (run the step with srun -m cyclic, or -m arbitrary with SLURM_HOSTFILE, or have the site set SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK)"
run_stdout 1 60 srun -p topo -N3 -n6 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
assert_eq "" "$E2E_OUTPUT" "no task ran"
# slurmstepd prefixes its lines with its name (22.05, 24.11: `slurmstepd-n1: `) or, from 26.05,
# with a timestamp (`[2026-11-26T13:46:47.544] `).
errors=$(sed -nE 's/^(slurmstepd-[^:]*: |\[[-0-9T:.]+\] )error: tfslurm: /tfslurm: /p' <<<"$E2E_STDERR")
assert_eq 6 "$(grep -cxF "$line" <<<"$errors")" "the plugin's line in every task"$'\n'"$E2E_STDERR"
assert_eq 6 "$(grep -c . <<<"$errors")" "no other plugin error"$'\n'"$E2E_STDERR"
assert_no_drain

e2e_log "the cyclic step in partition topo gets its TF_CONFIG (name order)"
run_stdout 0 60 srun -p topo -N3 -n6 -m cyclic --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1
assert_eq "0 n1 1 n2 2 n3 3 n1 4 n2 5 n3" \
    "$(sort -n <<<"$E2E_OUTPUT" | cut -d' ' -f1,2 | paste -sd' ')" "ranks of the cyclic step"

no_leftovers 20
e2e_log "PASS"
