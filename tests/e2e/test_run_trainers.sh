#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# srun tfslurm run on the real cluster with a TensorFlow-like trainer: every task listens on its
# own TF_CONFIG address, each worker connects to every parameter server across the nodes and
# exchanges data, the ps never exit by themselves. The step must end with status 0 once the
# workers are done, with the ps stopped by tfslurm, and leave no process on any node.
# Launchers authenticate with MUNGE (the cluster's munged).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# 2 ps spread over n1 and n2, 4 workers; --until workers (the default).
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=2 --resv-ports=3 \
    "$E2E_TFSLURM" run --ps 2 --ps-placement spread --auth munge --grace 5 -- \
    "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
# Each of the 4 workers exchanged with both ps, by address, across hosts.
assert_eq 8 "$(grep -c 'exchanged with ps:' <<<"$out")" "worker/ps exchanges"$'\n'"$out"
assert_eq 4 "$(grep -c 'exiting with status 0' <<<"$out")" "workers that finished"$'\n'"$out"
assert_contains "$out" "coordinator: the work is done (every worker exited 0): stopping 2 remaining ranks" \
    "the coordinator's verdict"
assert_eq 2 "$(grep -c 'the work is done: stopping the trainer' <<<"$out")" "ps stopped by tfslurm"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"

# TF2 ParameterServerStrategy: the workers serve forever too; the chief's exit ends the step.
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=2 \
    "$E2E_TFSLURM" run --ps 2 --chief --until chief --auth munge --grace 5 -- \
    "$E2E_TRAINER" --on worker --serve --on chief --work-ms 300
assert_contains "$E2E_OUTPUT" "coordinator: the work is done (the chief exited 0): stopping 5 remaining ranks" \
    "--until chief verdict"

# Every trainer sees the GPUs it should: with --gpu-bind task its share of the node's visible
# GPUs; by default (torch variables set) the node's GPUs, cuda:LOCAL_RANK being its own.
# shellcheck disable=SC2016 # expanded by the trainer's shell
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=2 --gpus-per-node=4 \
    "$E2E_TFSLURM" run --auth munge --gpu-bind task -- bash -c 'echo "gpu $SLURM_PROCID $CUDA_VISIBLE_DEVICES"'
assert_eq "gpu 0 0,1|gpu 1 2,3|gpu 2 0,1|gpu 3 2,3|gpu 4 0,1|gpu 5 2,3" \
    "$(grep '^gpu ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "trainers' CUDA_VISIBLE_DEVICES"

no_leftovers 20
e2e_log "PASS"
