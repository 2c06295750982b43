#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `tfslurm run` in a step that Slurm laid out in topology order. On the test cluster of 26.05,
# `srun -p topo -N3 -n6` puts ranks 0,1 on n3, 2,3 on n1 and 4,5 on n2 while every variable
# stays in name order (test_env_topology.sh). Every launcher asks the controller for the layout
# (`sattach --layout`), so rank 0's launcher, which hosts the coordinator, and every other one
# agree on where each rank is: the step runs, and every trainer's TF_CONFIG names, for every
# rank, the host that rank really ran on (each trainer prints its rank, its host and its
# TF_CONFIG; check_cluster.py checks that all agree and that each own entry is its host).
# Without the layout (no sattach in PATH) every launcher refuses the step before any trainer
# starts. Releases without topology.yaml (22.05, 24.11) have no "topo" partition: there the same
# block step is in name order, and tfslurm runs it so.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
checker="$(dirname -- "${BASH_SOURCE[0]}")/check_cluster.py"

# shellcheck disable=SC2016 # expanded by the trainer's shell
trainer='[ "$TFSLURM_RANK" = "$SLURM_PROCID" ] || echo "rank $SLURM_PROCID: TFSLURM_RANK=$TFSLURM_RANK"
printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "$TF_CONFIG"'

# check_run NTASKS EXPECTED ARGS...: `srun ARGS tfslurm run --ps 1`, every trainer's TF_CONFIG
# checked; EXPECTED is "rank:host ..." as the trainers ran.
check_run() {
    local ntasks=$1 expected=$2 summary
    shift 2
    run_stdout 0 90 srun "$@" "$E2E_TFSLURM" run --ps 1 --auth munge -- bash -c "$trainer"
    summary=$(printf '%s\n' "$E2E_OUTPUT" | python3 "$checker" "$ntasks") ||
        fail "srun $*: $summary"$'\n'"$E2E_OUTPUT"$'\n'"$E2E_STDERR"
    assert_eq "ok $expected" "$summary" "the trainers of srun $*"$'\n'"$E2E_OUTPUT"
    e2e_log "srun $* tfslurm run: $summary"
}

if [[ $TC_SLURM == 22.05 || $TC_SLURM == 24.11 ]]; then
    e2e_log "Slurm $TC_SLURM reads no topology.yaml: block is name order, and tfslurm runs it so"
    check_run 6 "0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" -N3 -n6
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi

e2e_log "every trainer's TF_CONFIG names the hosts where Slurm ran the ranks"
check_run 6 "0:n3 1:n3 2:n1 3:n1 4:n2 5:n2" -p topo -N3 -n6
check_run 5 "0:n3 1:n1 2:n1 3:n2 4:n2" -p topo -N3 -n5

e2e_log "without the controller's layout every launcher refuses the step before any trainer"
topology="topology \"tree\" (tree) of partition topo in $TC_DIR/etc/topology.yaml"
refusal="tfslurm: error: placement: Slurm lays a block distribution over several nodes out in the order of the network topology ($topology), which no task's environment shows: \"block\""
run_stdout 5 60 srun -p topo -N3 -n3 env PATH=/nonexistent "$E2E_TFSLURM" run --ps 1 \
    --auth munge -- /bin/echo started
assert_eq 0 "$(grep -c '^started' <<<"$E2E_OUTPUT")" "no trainer started"
assert_eq 3 "$(grep -cxF "$refusal" <<<"$E2E_STDERR")" "one refusal per task"$'\n'"$E2E_STDERR"
assert_eq 3 "$(grep -c "sattach not found in PATH" <<<"$E2E_STDERR")" "the hint of every task"

no_leftovers 20
e2e_log "PASS"
