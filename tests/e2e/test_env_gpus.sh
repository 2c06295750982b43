#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# GPUs on the test cluster's fake GRES devices: with --gpus-per-node each task gets its share
# of the visible GPUs (--gpu-bind task); with --gpus-per-task (Slurm binds per task) each keeps
# its own; without GPUs nothing is set and nothing fails. --only gpus alone prints what the
# default prints next to the torch variables (the node's GPUs): a group's values never depend
# on which groups are printed. With the torch variables (the default), cuda:LOCAL_RANK must be a device of the
# task, under `tfslurm env` and `tfslurm run` alike: CUDA numbers CUDA_VISIBLE_DEVICES from 0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# shellcheck disable=SC2016 # expanded by the task's shell, not here
task='printf "%s %s\n" "$SLURM_PROCID" "$("$E2E_TFSLURM" env --format env --only gpus --gpu-bind task | sed -n "s/^CUDA_VISIBLE_DEVICES=//p")"'

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

# --only gpus without --gpu-bind: the node's GPUs, exactly what the torch groups print next to
# them (evaluated separately, cuda:LOCAL_RANK is still one of the task's devices).
task=${task/ --gpu-bind task/}
assert_eq "0 0,1 1 0,1 2 0,1 3 0,1 4 0,1 5 0,1 " "$(gpus_of --gpus-per-node=2)" "--only gpus alone"

# torch.cuda.set_device(LOCAL_RANK) works iff LOCAL_RANK < the number of visible devices.
# shellcheck disable=SC2016 # expanded by the task
ordinal_check='import os
visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
count = len(visible.split(",")) if visible else 0
local = int(os.environ["LOCAL_RANK"])
print(os.environ["RANK"], "ok" if local < count else "bad", "cuda:%d" % local, visible)'
sorted_lines() { sort -n | paste -sd'|'; }
want="0 ok cuda:0 0,1|1 ok cuda:1 0,1|2 ok cuda:0 0,1|3 ok cuda:1 0,1|4 ok cuda:0 0,1|5 ok cuda:1 0,1"

# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --gpus-per-node=2 \
    bash -c 'eval "$("$E2E_TFSLURM" env)"; exec python3 -c "$1"' check "$ordinal_check"
assert_eq "$want" "$(sorted_lines <<<"$E2E_OUTPUT")" "tfslurm env: cuda:LOCAL_RANK among CUDA_VISIBLE_DEVICES"

run_stdout 0 120 srun -N3 --ntasks-per-node=2 --gpus-per-node=2 \
    "$E2E_TFSLURM" run --auth munge -- python3 -c "$ordinal_check"
assert_eq "$want" "$(grep ' cuda:' <<<"$E2E_OUTPUT" | sorted_lines)" \
    "tfslurm run: cuda:LOCAL_RANK among CUDA_VISIBLE_DEVICES"

# --gpu-bind task: TensorFlow's split, each task's share is cuda:0 inside it.
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --gpus-per-node=2 \
    bash -c 'eval "$("$E2E_TFSLURM" env --gpu-bind task)"; echo "$RANK $CUDA_VISIBLE_DEVICES"'
assert_eq "0 0|1 1|2 0|3 1|4 0|5 1" "$(sorted_lines <<<"$E2E_OUTPUT")" "--gpu-bind task"

no_leftovers 20
e2e_log "PASS"
