#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The TensorFlow examples without TensorFlow: each trainer checks the TF_CONFIG it receives as
# TFConfigClusterResolver reads it (examples/common/tf_config_check.py) and prints one
# summary line, which must be exactly right for every task on the three nodes:
# TF1 ps/worker and TF2 ParameterServerStrategy (--until chief) through `tfslurm run` (the ps,
# and the TF2 workers, wait until tfslurm stops them), MultiWorkerMirroredStrategy through
# `tfslurm env` (the example's job script under sbatch).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_examples
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")

# tf_lines: the summary lines of E2E_OUTPUT, sorted.
tf_lines() { grep '^tf_config:' <<<"$E2E_OUTPUT" | sort; }

e2e_log "tf1-ps-worker: srun tfslurm run --ps 2 --ps-placement spread --rpc-layer grpc"
run_stdout 0 90 srun -N3 --ntasks-per-node=2 tfslurm run --ps 2 --ps-placement spread \
    --rpc-layer grpc --auth munge --grace 5 -- python3 "$EXAMPLES/tf1-ps-worker/train.py"
c="cluster ps*2,worker*4 rpc_layer=grpc strategy=tf1-ps ok"
assert_eq "$(printf '%s\n' "tf_config: ps:0 on ${n[0]} $c" "tf_config: ps:1 on ${n[1]} $c" \
    "tf_config: worker:0 on ${n[0]} $c" "tf_config: worker:1 on ${n[1]} $c" \
    "tf_config: worker:2 on ${n[2]} $c" "tf_config: worker:3 on ${n[2]} $c" | sort)" \
    "$(tf_lines)" "TF1 ps/worker TF_CONFIGs"
assert_contains "$E2E_OUTPUT$E2E_STDERR" \
    "coordinator: the work is done (every worker exited 0): stopping 2 remaining ranks" \
    "the ps are stopped once the workers are done"

e2e_log "tf2-parameter-server: srun tfslurm run --ps 2 --chief --until chief"
run_stdout 0 90 srun -N3 --ntasks-per-node=2 tfslurm run --ps 2 --chief --until chief \
    --rpc-layer grpc --auth munge --grace 5 -- python3 "$EXAMPLES/tf2-parameter-server/train.py"
c="cluster chief*1,ps*2,worker*3 rpc_layer=grpc strategy=tf2-ps ok"
assert_eq "$(printf '%s\n' "tf_config: chief:0 on ${n[1]} $c" \
    "tf_config: ps:0 on ${n[0]} $c" "tf_config: ps:1 on ${n[0]} $c" \
    "tf_config: worker:0 on ${n[1]} $c" "tf_config: worker:1 on ${n[2]} $c" \
    "tf_config: worker:2 on ${n[2]} $c" | sort)" "$(tf_lines)" "TF2 ParameterServerStrategy TF_CONFIGs"
assert_contains "$E2E_OUTPUT$E2E_STDERR" \
    "coordinator: the work is done (the chief exited 0): stopping 5 remaining ranks" \
    "the workers and ps are stopped once the chief is done"

e2e_log "tf2-multi-worker-mirrored/job.sbatch: eval \"\$(tfslurm env --chief --only tf,gpus --gpu-bind task)\""
jid=$(sbatch_submit -D "$EXAMPLES/tf2-multi-worker-mirrored" -o "$dir/mwms.out" \
    "$EXAMPLES/tf2-multi-worker-mirrored/job.sbatch")
rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 0 "$rc" "job $jid ended $E2E_JOB_STATE:"$'\n'"$(cat "$dir/mwms.out")"
E2E_OUTPUT=$(cat "$dir/mwms.out")
c="cluster chief*1,worker*2 rpc_layer=none strategy=mwms ok"
assert_eq "$(printf '%s\n' "tf_config: chief:0 on ${n[0]} $c" "tf_config: worker:0 on ${n[1]} $c" \
    "tf_config: worker:1 on ${n[2]} $c")" "$(tf_lines)" "MultiWorkerMirroredStrategy TF_CONFIGs"

no_leftovers 20
e2e_log "PASS"
