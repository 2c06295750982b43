#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Heterogeneous and arbitrary steps through `tfslurm run` on the real cluster.
# - `srun -n1 -w n1 A : -n2 -w n2,n3 A`: each ':'-separated component gets its own command line
#   (here the same one); with `--roles-by-component ps,worker` component 0 is the ps and
#   component 1 the workers, and the workers really connect to the ps.
# - Ranks come component after component even where every task's SLURM_DISTRIBUTION says
#   cyclic (`srun -n2 -w n1 : -n1 -w n2`).
# - `--roles-by-component` outside a heterogeneous step, or with a role per component missing,
#   fails before any trainer starts.
# - `srun -m arbitrary` with SLURM_HOSTFILE: TF_CONFIG places every rank where the hostfile
#   says, and the workers connect to the ps there.
# Components that share a node: Slurm 22.05, 24.11 and 26.05 all refuse such a heterogeneous job
# ("Invalid node name specified", checked at the end on every release so that a Slurm that
# starts allowing it is noticed: tfslurm would then need each component's own local ids).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

run=("$E2E_TFSLURM" run --roles-by-component "ps,worker" --port-base 23000 --auth munge --grace 5 --)

# Each rank prints, then waits until every rank of the step has printed (a marker file per rank
# in the shared DIR): the workers' exit stops the ps, which must not happen before it printed.
# shellcheck disable=SC2016 # expanded by the trainer's shell
barrier='touch "$DIR/r$SLURM_PROCID"; while (($(ls "$DIR" | wc -l) < SLURM_NTASKS)); do sleep 0.1; done'

e2e_log "srun -n1 -w n1 : -n2 -w n2,n3, --roles-by-component ps,worker: TF_CONFIG of every rank"
# shellcheck disable=SC2016 # expanded by the trainer's shell
show='echo "tf $SLURM_PROCID $TF_CONFIG"; '$barrier
assert_status 0 run_bounded 120 env DIR="$(make_tmpdir)" srun -n1 -w n1 "${run[@]}" bash -c "$show" \
    : -n2 -w n2,n3 "${run[@]}" bash -c "$show"
cluster='{"cluster":{"ps":["n1:23000"],"worker":["n2:23000","n3:23000"]}'
assert_eq "tf 0 $cluster,\"task\":{\"type\":\"ps\",\"index\":0}}|tf 1 $cluster,\"task\":{\"type\":\"worker\",\"index\":0}}|tf 2 $cluster,\"task\":{\"type\":\"worker\",\"index\":1}}" \
    "$(grep '^tf ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "TF_CONFIG of the heterogeneous step"

e2e_log "the same step with the test trainer: the workers connect to the ps"
assert_status 0 run_bounded 120 srun -n1 -w n1 "${run[@]}" "$E2E_TRAINER" --work-ms 300 \
    : -n2 -w n2,n3 "${run[@]}" "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
assert_eq "tf_trainer[worker:0 rank=1]: exchanged with ps:0 at n1:23000|tf_trainer[worker:1 rank=2]: exchanged with ps:0 at n1:23000" \
    "$(grep -E '^tf_trainer\[.*exchanged with' <<<"$out" | sort | paste -sd'|')" \
    "workers that exchanged with the ps"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"

e2e_log "srun -n2 -w n1 : -n1 -w n2 (every task says cyclic): ranks component after component"
# shellcheck disable=SC2016 # expanded by the trainer's shell
where='echo "at $SLURM_PROCID $(hostname) $TF_CONFIG"; '$barrier
assert_status 0 run_bounded 120 env DIR="$(make_tmpdir)" srun -n2 -w n1 "${run[@]}" bash -c "$where" \
    : -n1 -w n2 "${run[@]}" bash -c "$where"
cluster='{"cluster":{"ps":["n1:23000","n1:23001"],"worker":["n2:23000"]}'
assert_eq "at 0 n1 $cluster,\"task\":{\"type\":\"ps\",\"index\":0}}|at 1 n1 $cluster,\"task\":{\"type\":\"ps\",\"index\":1}}|at 2 n2 $cluster,\"task\":{\"type\":\"worker\",\"index\":0}}" \
    "$(grep '^at ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "ranks of the uneven heterogeneous step"

e2e_log "--roles-by-component refused before any trainer starts"
assert_status 2 run_bounded 60 srun -N2 -n2 "${run[@]}" echo started
assert_eq 'tfslurm: error: --roles-by-component: needs a heterogeneous step, and this step has one component (SLURM_HET_SIZE is not set): "ps,worker"' \
    "$(grep '^tfslurm: error' <<<"$E2E_OUTPUT" | sort -u)" "outside a heterogeneous step"
assert_eq 0 "$(grep -c '^started' <<<"$E2E_OUTPUT")" "no trainer started"
three=("$E2E_TFSLURM" run --roles-by-component "ps,worker,worker" --port-base 23000 --auth munge --)
assert_status 2 run_bounded 60 srun -n1 -w n1 "${three[@]}" echo started : -n1 -w n2 "${three[@]}" echo started
assert_eq 'tfslurm: error: --roles-by-component: gives 3 roles for a heterogeneous step of 2 components: "ps,worker,worker"' \
    "$(grep '^tfslurm: error' <<<"$E2E_OUTPUT" | sort -u)" "a role too many"
assert_eq 0 "$(grep -c '^started' <<<"$E2E_OUTPUT")" "no trainer started"

e2e_log "srun -n4 -m arbitrary: ranks where SLURM_HOSTFILE puts them, workers connect to the ps"
dir=$(make_tmpdir)
printf '%s\n' n3 n1 n3 n2 >"$dir/hosts"
arb=("$E2E_TFSLURM" run --ps 1 --port-base 23000 --auth munge --grace 5 --)
assert_status 0 run_bounded 120 env SLURM_HOSTFILE="$dir/hosts" DIR="$(make_tmpdir)" \
    srun -n4 -m arbitrary "${arb[@]}" bash -c "$where"
cluster='{"cluster":{"ps":["n3:23000"],"worker":["n1:23000","n3:23001","n2:23000"]}'
assert_eq "at 0 n3 $cluster,\"task\":{\"type\":\"ps\",\"index\":0}}|at 1 n1 $cluster,\"task\":{\"type\":\"worker\",\"index\":0}}|at 2 n3 $cluster,\"task\":{\"type\":\"worker\",\"index\":1}}|at 3 n2 $cluster,\"task\":{\"type\":\"worker\",\"index\":2}}" \
    "$(grep '^at ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "TF_CONFIG of the arbitrary step"
assert_status 0 run_bounded 120 env SLURM_HOSTFILE="$dir/hosts" srun -n4 -m arbitrary \
    "${arb[@]}" "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT
assert_eq "tf_trainer[worker:0 rank=1]: exchanged with ps:0 at n3:23000|tf_trainer[worker:1 rank=2]: exchanged with ps:0 at n3:23000|tf_trainer[worker:2 rank=3]: exchanged with ps:0 at n3:23000" \
    "$(grep -E '^tf_trainer\[.*exchanged with' <<<"$out" | sort | paste -sd'|')" \
    "workers that exchanged with the ps of the arbitrary step"$'\n'"$out"

e2e_log "components sharing a node: refused by Slurm $TC_SLURM itself"
assert_status 1 run_bounded 60 srun -n1 -w n1 true : -n1 -w n1 true
assert_eq "srun: error: Unable to allocate resources: Invalid node name specified" \
    "$(grep '^srun: error' <<<"$E2E_OUTPUT")" "Slurm refuses components that share a node"

no_leftovers 20
e2e_log "PASS"
