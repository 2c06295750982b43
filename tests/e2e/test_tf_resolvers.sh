#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# TensorFlow's own cluster resolvers as the oracle, inside real steps of every shape the test
# cluster makes (block, cyclic, plane, uneven, arbitrary, heterogeneous): in every task,
# tf_resolver_oracle.py (TensorFlow venv) checks that
# - TFConfigClusterResolver, on the TF_CONFIG of `tfslurm env`, gives the cluster and role of
#   `tfslurm plan --json`, with this rank's address on the host it runs on;
# - SlurmClusterResolver, with the same jobs and ports, gives exactly the cluster, task (and
#   CUDA_VISIBLE_DEVICES) of `tfslurm env --layout tf-compat`,
# and prints one line for each. Where TensorFlow's resolver is wrong, the tf-compat line says
# on which host TensorFlow puts the rank (it assumes block placement on sorted hosts), while the
# native line shows where Slurm runs it; with CUDA_VISIBLE_DEVICES holding GPU UUIDs, TensorFlow
# (and tf-compat) write node-relative indices where tfslurm gives each task its own UUID
# (man tfslurm, TENSORFLOW'S RESOLVER).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
oracle=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)/tf_resolver_oracle.py
dir=$(make_tmpdir)

# shape NAME EXPECTED SRUN_ARGS... -- ORACLE_ARGS...: run the oracle in every task of
# `srun SRUN_ARGS` (each component's, with ':'); its lines, with the derived ports of the native layout replaced by PORT and
# sorted, must be EXPECTED.
shape() {
    local name=$1 expected=$2 got
    shift 2
    local -a srun_args=() oracle_args=()
    while (($#)) && [[ $1 != -- ]]; do
        srun_args+=("$1")
        shift
    done
    shift
    oracle_args=("$@")
    e2e_log "$name: srun ${srun_args[*]}"
    # A heterogeneous step (SRUN_ARGS with ':') gives each component its own command line.
    local -a command=() arg
    for arg in "${srun_args[@]}"; do
        if [[ $arg == : ]]; then
            command+=(python3 "$oracle" "${oracle_args[@]}" :)
        else
            command+=("$arg")
        fi
    done
    run_stdout 0 240 srun "${command[@]}" python3 "$oracle" "${oracle_args[@]}"
    got=$(grep -E '^(native|tf-compat|MISMATCH) ' <<<"$E2E_OUTPUT" |
        sed -E 's/^(native .* at [^ ]+):[0-9]+([ ;])/\1:PORT\2/' | sort)
    assert_eq "$(sort <<<"$expected")" "$got" "$name: TensorFlow's resolvers against tfslurm"
}

tc() { printf '%s\n' "$@"; }
same="TFConfigClusterResolver == tfslurm plan"
compat="SlurmClusterResolver == tfslurm env --layout tf-compat"

# Block, 2 tasks on each of 2 nodes: TensorFlow agrees with Slurm.
shape block "$(tc \
    "native 0 on n1: ps:0 at n1:PORT; $same" \
    "native 1 on n1: worker:0 at n1:PORT; $same" \
    "native 2 on n2: worker:1 at n2:PORT; $same" \
    "native 3 on n2: worker:2 at n2:PORT; $same" \
    "tf-compat 0 on n1: ps:0 at n1:8888; $compat" \
    "tf-compat 1 on n1: worker:0 at n1:8889; $compat" \
    "tf-compat 2 on n2: worker:1 at n2:8888; $compat" \
    "tf-compat 3 on n2: worker:2 at n2:8889; $compat")" \
    -N2 -w n1,n2 --ntasks-per-node=2 -- --ps 1

# Cyclic: Slurm runs ranks 0 and 2 on n1, 1 and 3 on n2; TensorFlow assumes block placement.
shape cyclic "$(tc \
    "native 0 on n1: ps:0 at n1:PORT; $same" \
    "native 1 on n2: worker:0 at n2:PORT; $same" \
    "native 2 on n1: worker:1 at n1:PORT; $same" \
    "native 3 on n2: worker:2 at n2:PORT; $same" \
    "tf-compat 0 on n1: ps:0 at n1:8888; $compat" \
    "tf-compat 1 on n2: worker:0 at n1:8889; $compat; TensorFlow puts rank 1 on n1" \
    "tf-compat 2 on n1: worker:1 at n2:8888; $compat; TensorFlow puts rank 2 on n2" \
    "tf-compat 3 on n2: worker:2 at n2:8889; $compat")" \
    -N2 -w n1,n2 --ntasks-per-node=2 -m cyclic -- --ps 1

# Plane of 2 over 2 nodes, 3 tasks each (overcommitted: the nodes have 2 CPUs): ranks 0, 1
# and 4 on n1; 2, 3 and 5 on n2.
shape plane "$(tc \
    "native 0 on n1: ps:0 at n1:PORT; $same" \
    "native 1 on n1: worker:0 at n1:PORT; $same" \
    "native 2 on n2: worker:1 at n2:PORT; $same" \
    "native 3 on n2: worker:2 at n2:PORT; $same" \
    "native 4 on n1: worker:3 at n1:PORT; $same" \
    "native 5 on n2: worker:4 at n2:PORT; $same" \
    "tf-compat 0 on n1: ps:0 at n1:8888; $compat" \
    "tf-compat 1 on n1: worker:0 at n1:8889; $compat" \
    "tf-compat 2 on n2: worker:1 at n1:8890; $compat; TensorFlow puts rank 2 on n1" \
    "tf-compat 3 on n2: worker:2 at n2:8888; $compat" \
    "tf-compat 4 on n1: worker:3 at n2:8889; $compat; TensorFlow puts rank 4 on n2" \
    "tf-compat 5 on n2: worker:4 at n2:8890; $compat")" \
    -N2 -w n1,n2 -n6 --overcommit -m plane=2 -- --ps 1

# Uneven 2,1(x2): block, TensorFlow agrees.
shape uneven "$(tc \
    "native 0 on n1: ps:0 at n1:PORT; $same" \
    "native 1 on n1: worker:0 at n1:PORT; $same" \
    "native 2 on n2: worker:1 at n2:PORT; $same" \
    "native 3 on n3: worker:2 at n3:PORT; $same" \
    "tf-compat 0 on n1: ps:0 at n1:8888; $compat" \
    "tf-compat 1 on n1: worker:0 at n1:8889; $compat" \
    "tf-compat 2 on n2: worker:1 at n2:8888; $compat" \
    "tf-compat 3 on n3: worker:2 at n3:8888; $compat")" \
    -N3 -n4 -- --ps 1

# Arbitrary (SLURM_HOSTFILE n2, n1, n2): TensorFlow sorts the hosts and puts rank 0 on n1.
printf 'n2\nn1\nn2\n' >"$dir/hostfile"
SLURM_HOSTFILE=$dir/hostfile shape arbitrary "$(tc \
    "native 0 on n2: ps:0 at n2:PORT; $same" \
    "native 1 on n1: worker:0 at n1:PORT; $same" \
    "native 2 on n2: worker:1 at n2:PORT; $same" \
    "tf-compat 0 on n2: ps:0 at n1:8888; $compat; TensorFlow puts rank 0 on n1" \
    "tf-compat 1 on n1: worker:0 at n2:8888; $compat; TensorFlow puts rank 1 on n2" \
    "tf-compat 2 on n2: worker:1 at n2:8889; $compat")" \
    -n3 -m arbitrary -- --ps 1

# GPUs given as UUIDs (as Slurm 26.05 writes them; the test cluster's GPUs are fake and its
# Slurm 22.05 writes indices, so the task sets them): TensorFlow writes node-relative indices,
# tfslurm gives each task its own UUID.
shape gpu-uuids "$(tc \
    "native 0 on n1: worker:0 at n1:PORT CUDA_VISIBLE_DEVICES=GPU-aaaa; $same" \
    "native 1 on n1: worker:1 at n1:PORT CUDA_VISIBLE_DEVICES=GPU-bbbb; $same" \
    "tf-compat 0 on n1: worker:0 at n1:8888 CUDA_VISIBLE_DEVICES=0 (was GPU-aaaa,GPU-bbbb); $compat" \
    "tf-compat 1 on n1: worker:1 at n1:8889 CUDA_VISIBLE_DEVICES=1 (was GPU-aaaa,GPU-bbbb); $compat")" \
    -N1 -w n1 --ntasks-per-node=2 -- --gpus --visible-devices GPU-aaaa,GPU-bbbb

# Heterogeneous, srun -n1 -w n2 : -n2 -w n1,n3: ranks come component after component (0 on n2,
# 1 on n1, 2 on n3); TensorFlow sorts the step's hosts and puts rank 0 on n1.
shape het "$(tc \
    "native 0 on n2: ps:0 at n2:PORT; $same" \
    "native 1 on n1: worker:0 at n1:PORT; $same" \
    "native 2 on n3: worker:1 at n3:PORT; $same" \
    "tf-compat 0 on n2: ps:0 at n1:8888; $compat; TensorFlow puts rank 0 on n1" \
    "tf-compat 1 on n1: worker:0 at n2:8888; $compat; TensorFlow puts rank 1 on n2" \
    "tf-compat 2 on n3: worker:1 at n3:8888; $compat")" \
    -n1 -w n2 : -n2 -w n1,n3 -- --ps 1

no_leftovers 20
e2e_log "PASS"
