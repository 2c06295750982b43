#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# TF2 MultiWorkerMirroredStrategy with real TensorFlow across the three nodes:
# - examples/tf2-multi-worker-mirrored/job.sbatch, as shipped (each task evaluates
#   `tfslurm env --chief --only tf,gpus --gpu-bind task`): 20 synchronous steps, the gradients all-reduced by
#   collective ops over the TF_CONFIG addresses (node names, the 10.77.0.0/24 network); every
#   task must end with exactly the same weights (printed as float hex), moved from 0.
# - the same trainer over the cluster's second network: `srun --mpi=pmi2` and
#   `tfslurm env --iface ib0` (the nodes' ib0 addresses, 10.78.0.0/24, exchanged through PMI2):
#   TF_CONFIG names the ib0 addresses, and again the weights are equal on every task.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")

# check_weights OUTPUT ADDRESS...: one line per task, "TASK at ADDRESS:PORT on HOST: 20 steps,
# 3 replicas in sync, weights w=... b=...", tasks chief:0, worker:0, worker:1 on the nodes in
# order at the given addresses, all with the same weights, which are not the initial zeros.
check_weights() {
    local output=$1 lines weights
    shift
    lines=$(grep -E '^(chief|worker):[0-9]+ at ' <<<"$output" | sort)
    weights=$(sed -n 's/.* weights //p' <<<"$lines" | sort -u)
    assert_eq 1 "$(wc -l <<<"$weights")" "the same weights on every task:"$'\n'"$lines"
    [[ $weights =~ ^w=0x[0-9a-f.p+-]+\ b=0x[0-9a-f.p+-]+$ && $weights != *"w=0x0.0p+0"* ]] ||
        fail "weights not trained: \"$weights\""
    assert_eq "$(printf '%s\n' \
        "chief:0 at $1:PORT on ${n[0]}: 20 steps, 3 replicas in sync, weights $weights" \
        "worker:0 at $2:PORT on ${n[1]}: 20 steps, 3 replicas in sync, weights $weights" \
        "worker:1 at $3:PORT on ${n[2]}: 20 steps, 3 replicas in sync, weights $weights")" \
        "$(sed -E 's/ at ([^ ]+):[0-9]+ on / at \1:PORT on /' <<<"$lines")" \
        "every task's line"
    e2e_log "weights on every task: $weights"
}

e2e_log "sbatch examples/tf2-multi-worker-mirrored/job.sbatch"
jid=$(sbatch_submit -D "$EXAMPLES/tf2-multi-worker-mirrored" -o "$dir/job.out" \
    "$EXAMPLES/tf2-multi-worker-mirrored/job.sbatch")
rc=0
sbatch_wait "$jid" 300 || rc=$?
out=$(cat "$dir/job.out")
assert_eq 0 "$rc" "job $jid ended $E2E_JOB_STATE:"$'\n'"$out"
check_weights "$out" "${n[@]}"
no_leftovers 20

e2e_log "srun --mpi=pmi2 ... tfslurm env --chief --iface ib0: collective ops over ib0"
# shellcheck disable=SC2016 # expanded by each task's shell
run_stdout 0 240 srun -N3 --ntasks-per-node=1 --mpi=pmi2 -D "$EXAMPLES/tf2-multi-worker-mirrored" \
    bash -c 'eval "$(tfslurm env --chief --iface ib0 --only tf,gpus --gpu-bind task)" && exec python3 train.py'
check_weights "$E2E_OUTPUT" "$TC_IB_NET.11" "$TC_IB_NET.12" "$TC_IB_NET.13"
no_leftovers 20
e2e_log "PASS"
