#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tfslurm hostnames and tfslurm env inside real srun steps: for block, cyclic, uneven,
# overcommitted and arbitrary (srun -m arbitrary with SLURM_HOSTFILE) layouts, every rank's own
# TF_CONFIG entry names the host it actually runs on
# and all ranks agree on the whole cluster. The expected placements are Slurm's own
# (reference/slurm-env/srun-layout-variants.txt).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
checker="$(dirname -- "${BASH_SOURCE[0]}")/check_cluster.py"

# One line per task: rank, host name, TF_CONFIG.
# shellcheck disable=SC2016 # expanded by the task's shell, not here
task_line='printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "$("$E2E_TFSLURM" env --format env --only tf --ps 1 | sed -n "s/^TF_CONFIG=//p")"'

check_layout() {
    local ntasks=$1 expected=$2 out summary
    shift 2
    out=$(run_bounded 60 srun "$@" bash -c "$task_line") || fail "srun $* failed: $out"
    summary=$(printf '%s\n' "$out" | python3 "$checker" "$ntasks") ||
        fail "srun $*: $summary"$'\n'"$out"
    assert_eq "ok $expected" "$summary" "placement of srun $*"
    e2e_log "srun $*: $summary"
}

check_layout 6 "0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" -N3 --ntasks-per-node=2
check_layout 4 "0:n1 1:n1 2:n2 3:n3" -N3 -n4
check_layout 7 "0:n1 1:n1 2:n1 3:n2 4:n2 5:n3 6:n3" -N3 -n7 --overcommit
check_layout 6 "0:n1 1:n2 2:n3 3:n1 4:n2 5:n3" -N3 --ntasks-per-node=2 -m cyclic
check_layout 3 "0:n1 1:n1 2:n2" -N2 -n3
check_layout 4 "0:n2 1:n2 2:n3 3:n3" -n4 -w 'n[2-3]' --ntasks-per-node=2

# Arbitrary: rank i on the i-th host of SLURM_HOSTFILE (NAME*N, commas and comments included).
# At most 2 tasks per node (its CPUs): 24.11 and later refuse a layout that can never run.
hostfile=$(make_tmpdir)/hostfile
printf 'n3*2\n# the rest\nn1,n2\n\nn2,n1\n' >"$hostfile"
SLURM_HOSTFILE=$hostfile check_layout 6 "0:n3 1:n3 2:n1 3:n2 4:n2 5:n1" -n6 -m arbitrary
printf 'n2\nn1\nn2\n' >"$hostfile"
SLURM_HOSTFILE=$hostfile check_layout 3 "0:n2 1:n1 2:n2" -n3 -m arbitrary

# tfslurm hostnames inside a step equals scontrol's expansion of the step's nodelist.
# shellcheck disable=SC2016 # expanded by the task's shell
out=$(run_bounded 60 srun -N3 --ntasks-per-node=1 bash -c \
    'diff <("$E2E_TFSLURM" hostnames) <(scontrol show hostnames "$SLURM_STEP_NODELIST") && echo same') ||
    fail "tfslurm hostnames differs from scontrol inside a step: $out"
assert_eq $'same\nsame\nsame' "$out" "tfslurm hostnames in every task"

no_leftovers 20
e2e_log "PASS"
