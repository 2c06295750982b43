#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Placement when Slurm follows a network topology. From Slurm 25.05 a partition may have a
# topology of its own (topology.yaml); the test cluster of 26.05 has the partition "topo", whose
# tree puts the last node alone under one switch (scripts/test-cluster.d/up.sh), and 26.05 lays
# out a block distribution there in the topology's order: `srun -p topo -N3 -n6` puts ranks 0,1
# on n3, while SLURM_STEP_NODELIST, SLURM_NODEID and SLURM_STEP_TASKS_PER_NODE all stay in name
# order and no task's environment shows the order (SLURM_GTIDS lists the task's own node only).
# `tfslurm env` asks the controller (`sattach --layout`) and gives every rank the TF_CONFIG of
# where Slurm really ran each rank; without that answer (no sattach in PATH) every task refuses
# the step with one line naming the topology, even the tasks whose own identity happens to agree
# with the nodelist's order. Cyclic and arbitrary layouts, which Slurm keeps in name (or
# hostfile) order, need no answer. `tfslurm run` is tested in test_run_topology.sh, the SPANK
# plugin in test_spank_topology.sh. Releases without topology.yaml (22.05,
# 24.11) have no "topo" partition: there the test checks that the same block step is in name
# order and that tfslurm places it so.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
checker="$(dirname -- "${BASH_SOURCE[0]}")/check_cluster.py"

# shellcheck disable=SC2016 # expanded by the task's shell
where='echo "$SLURM_PROCID $(hostname) $SLURM_NODEID $SLURM_LOCALID $SLURM_STEP_NODELIST"'
# shellcheck disable=SC2016 # expanded by the task's shell
task_line='printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "$("$E2E_TFSLURM" env --format env --only tf --ps 1 | sed -n "s/^TF_CONFIG=//p")"'

# places ARGS...: "rank host nodeid localid nodelist" of every task of `srun ARGS`, by rank.
places() {
    run_stdout 0 60 srun "$@" bash -c "$where"
    sort -n <<<"$E2E_OUTPUT" | paste -sd'|'
}

# check_layout NTASKS EXPECTED ARGS...: every task's TF_CONFIG through tfslurm env, checked.
check_layout() {
    local ntasks=$1 expected=$2 out summary
    shift 2
    out=$(run_bounded 60 srun "$@" bash -c "$task_line") || fail "srun $* failed: $out"
    summary=$(printf '%s\n' "$out" | python3 "$checker" "$ntasks") ||
        fail "srun $*: $summary"$'\n'"$out"
    assert_eq "ok $expected" "$summary" "placement of srun $*"
    e2e_log "srun $*: $summary"
}

if [[ $TC_SLURM == 22.05 || $TC_SLURM == 24.11 ]]; then
    e2e_log "Slurm $TC_SLURM reads no topology.yaml: block is name order, and tfslurm places it so"
    assert_status 1 run_bounded 30 srun -p topo -n1 true
    assert_eq $'srun: error: invalid partition specified: topo\nsrun: error: Unable to allocate resources: Invalid partition name specified' \
        "$(grep '^srun: error' <<<"$E2E_OUTPUT")" "no partition topo"
    assert_eq "0 n1 0 0 n[1-3]|1 n1 0 1 n[1-3]|2 n2 1 0 n[1-3]|3 n2 1 1 n[1-3]|4 n3 2 0 n[1-3]|5 n3 2 1 n[1-3]" \
        "$(places -N3 -n6)" "Slurm's block layout"
    check_layout 6 "0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" -N3 -n6
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi

e2e_log "Slurm's own layouts in partition topo (tree: n3 | n1 n2)"
assert_eq "0 n3 2 0 n[1-3]|1 n3 2 1 n[1-3]|2 n1 0 0 n[1-3]|3 n1 0 1 n[1-3]|4 n2 1 0 n[1-3]|5 n2 1 1 n[1-3]" \
    "$(places -p topo -N3 -n6)" "block in topology order, every variable in name order"
assert_eq "0 n3 2 0 n[1-3]|1 n1 0 0 n[1-3]|2 n1 0 1 n[1-3]|3 n2 1 0 n[1-3]|4 n2 1 1 n[1-3]" \
    "$(places -p topo -N3 -n5)" "uneven block in topology order"
assert_eq "0 n1 0 0 n[1-3]|1 n2 1 0 n[1-3]|2 n3 2 0 n[1-3]|3 n1 0 1 n[1-3]|4 n2 1 1 n[1-3]|5 n3 2 1 n[1-3]" \
    "$(places -p topo -N3 -n6 -m cyclic)" "cyclic in name order"
assert_eq "0 n1 0 0 n[1-3]|1 n1 0 1 n[1-3]|2 n2 1 0 n[1-3]|3 n2 1 1 n[1-3]|4 n3 2 0 n[1-3]|5 n3 2 1 n[1-3]" \
    "$(places -N3 -n6)" "the default partition (flat) in name order"

e2e_log "tfslurm env places every rank where Slurm ran it (the controller's layout)"
check_layout 6 "0:n3 1:n3 2:n1 3:n1 4:n2 5:n2" -p topo -N3 -n6
check_layout 5 "0:n3 1:n1 2:n1 3:n2 4:n2" -p topo -N3 -n5
check_layout 3 "0:n3 1:n1 2:n2" -p topo -N3 -n3 -m block

e2e_log "without the controller's layout (no sattach in PATH) every task refuses the step"
topology="topology \"tree\" (tree) of partition topo in $TC_DIR/etc/topology.yaml"
refusal="placement: Slurm lays a block distribution over several nodes out in the order of the network topology ($topology), which no task's environment shows: \"block\""
advice="run the step with srun -m cyclic, or -m arbitrary with SLURM_HOSTFILE, or have the site set SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK"
# In -N3 -n6 every task disagrees with the name order; in -n5 rank 0 (n3, local 0) and the
# ranks on n1 and n2 do too, but the refusal never depends on that: every task refuses.
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 5 60 srun -p topo -N3 -n6 bash -c \
    'echo "$SLURM_JOB_ID.$SLURM_STEP_ID"; PATH=/nonexistent "$E2E_TFSLURM" env --ps 1 >/dev/null'
step=$(sort -u <<<"$E2E_OUTPUT")
hint="tfslurm: hint: the controller's layout could not be read (sattach --layout $step: sattach not found in PATH); $advice"
assert_eq 6 "$(grep -cxF "tfslurm: error: $refusal" <<<"$E2E_STDERR")" "one refusal per task"$'\n'"$E2E_STDERR"
assert_eq 6 "$(grep -cxF "$hint" <<<"$E2E_STDERR")" "one hint per task"$'\n'"$E2E_STDERR"
assert_eq 6 "$(grep -c 'tfslurm: error' <<<"$E2E_STDERR")" "no other error"

e2e_log "layouts Slurm keeps in name or hostfile order work in partition topo"
check_layout 6 "0:n1 1:n2 2:n3 3:n1 4:n2 5:n3" -p topo -N3 -n6 -m cyclic
hostfile=$(make_tmpdir)/hostfile
printf 'n3\nn1\nn2\nn3\n' >"$hostfile"
SLURM_HOSTFILE=$hostfile check_layout 4 "0:n3 1:n1 2:n2 3:n3" -p topo -n4 -m arbitrary
check_layout 2 "0:n2 1:n2" -p topo -N1 -n2 -w n2
check_layout 6 "0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" -N3 -n6

no_leftovers 20
e2e_log "PASS"
