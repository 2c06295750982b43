#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# GPUs on the test cluster's fake GRES devices: with --gpus-per-node each task gets its share
# of the visible GPUs; with --gpus-per-task (Slurm binds per task) each keeps its own; without
# GPUs nothing is set and nothing fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm

# shellcheck disable=SC2016 # expanded by the task's shell, not here
task='printf "%s %s\n" "$SLURM_PROCID" "$("$TFSLURM_BIN" env --format env --only gpus | sed -n "s/^CUDA_VISIBLE_DEVICES=//p")"'

gpus_of() {
    local out
    out=$(run_bounded 60 srun -N3 --ntasks-per-node=2 "$@" bash -c "$task") || fail "srun $* failed: $out"
    printf '%s\n' "$out" | sort -n | tr '\n' ' '
}

assert_eq "0 0 1 1 2 0 3 1 4 0 5 1 " "$(gpus_of --gpus-per-node=2)" "--gpus-per-node=2"
assert_eq "0 0,1 1 2,3 2 0,1 3 2,3 4 0,1 5 2,3 " "$(gpus_of --gpus-per-node=4)" "--gpus-per-node=4"
assert_eq "0 0 1 1 2 0 3 1 4 0 5 1 " "$(gpus_of --gpus-per-task=1)" "--gpus-per-task=1"
assert_eq "0 0,1 1 2,3 2 0,1 3 2,3 4 0,1 5 2,3 " "$(gpus_of --gpus-per-task=2)" "--gpus-per-task=2"
assert_eq "0  1  2  3  4  5  " "$(gpus_of)" "no GPUs requested"

no_leftovers 20
e2e_log "PASS"
