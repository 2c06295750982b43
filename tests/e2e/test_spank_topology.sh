#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The SPANK plugin in a step that Slurm laid out in topology order. On the test cluster of 26.05,
# `srun -p topo -N3 -n6` puts ranks 0,1 on n3, 2,3 on n1 and 4,5 on n2 while every variable
# stays in name order (test_env_topology.sh). The plugin, in each task before its program
# starts, asks the controller for the layout (`sattach --layout`, from the task's PATH, with its
# environment) as tfslurm env and run do: every task gets the TF_CONFIG of where Slurm really
# put each rank. A task that cannot ask (no sattach in its PATH) fails before its program
# starts with one line naming the command and why, and no node is drained. Cyclic steps, which
# Slurm keeps in name order, need no layout. Releases without topology.yaml (22.05, 24.11) have
# no "topo" partition: there the same block step is in name order, and the plugin places it so.
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

e2e_log "the block step in partition topo: every task's TF_CONFIG follows the controller's layout"
run_stdout 0 60 srun -p topo -N3 -n6 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1
assert_eq "0 n3 1 n3 2 n1 3 n1 4 n2 5 n2" \
    "$(sort -n <<<"$E2E_OUTPUT" | cut -d' ' -f1,2 | paste -sd' ')" "ranks of the block step"
# Rank 0 (the ps) is on n3: every task names it there.
assert_eq 6 "$(grep -c '"ps":\["n3:' <<<"$E2E_OUTPUT")" "every task puts the ps on n3"$'\n'"$E2E_OUTPUT"

e2e_log "without sattach in the task's PATH, every task fails with the same line"
# --export=PATH=... (not ALL,PATH=...: 26.05 keeps srun's own PATH then) sets the task's PATH.
run_stdout 1 60 srun -p topo -N3 -n6 --export=PATH=/nonexistent --tfslurm=ps=1 \
    /bin/bash -c "$SPANK_PRINT_TASK"
assert_eq "" "$E2E_OUTPUT" "no task ran"
# slurmstepd prefixes its lines with its name (22.05, 24.11: `slurmstepd-n1: `) or, from 26.05,
# with a timestamp (`[2026-11-26T13:46:47.544] `).
errors=$(sed -nE 's/^(slurmstepd-[^:]*: |\[[-0-9T:.]+\] )error: tfslurm: /tfslurm: /p' <<<"$E2E_STDERR")
topology="topology \"tree\" (tree) of partition topo in $TC_DIR/etc/topology.yaml"
prefix="tfslurm: placement: Slurm lays a block distribution over several nodes out in the order of the network topology ($topology), which no task's environment shows: \"block\" (the controller's layout could not be read (sattach --layout "
suffix=".0: sattach not found in PATH); run the step with srun -m cyclic, or -m arbitrary with SLURM_HOSTFILE, or have the site set SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK)"
matching=0
while IFS= read -r error; do
    [[ $error == "$prefix"[0-9]*"$suffix" ]] && matching=$((matching + 1))
done <<<"$errors"
assert_eq 6 "$matching" "the plugin's line, naming sattach, in every task"$'\n'"$E2E_STDERR"
assert_eq 6 "$(grep -c . <<<"$errors")" "no other plugin error"$'\n'"$E2E_STDERR"
assert_no_drain

e2e_log "the cyclic step in partition topo gets its TF_CONFIG (name order)"
run_stdout 0 60 srun -p topo -N3 -n6 -m cyclic --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1
assert_eq "0 n1 1 n2 2 n3 3 n1 4 n2 5 n3" \
    "$(sort -n <<<"$E2E_OUTPUT" | cut -d' ' -f1,2 | paste -sd' ')" "ranks of the cyclic step"

no_leftovers 20
e2e_log "PASS"
