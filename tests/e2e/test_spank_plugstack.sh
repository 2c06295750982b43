#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# spank_tfslurm.so's plugstack.conf arguments: an unknown key stops srun and sbatch with one
# "tfslurm:" line; site defaults apply below TFSLURM_* variables and --tfslurm; enabled=always
# sets the variables in every step without the option, best effort (a plan that cannot work
# leaves the task alone instead of failing it), and --tfslurm=off opts a step out.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin

# without_last_field TEXT: every line of TEXT without its last space-separated field.
without_last_field() {
    local line
    while IFS= read -r line; do
        printf '%s\n' "${line% *}"
    done <<<"$1"
}

e2e_log "an unknown plugstack.conf argument fails srun and sbatch at once"
spank_install ps=1 bogus=1
line='tfslurm: plugstack.conf: unknown setting (known: ps, chief, evaluator, roles, roles_by_component, ps_placement, layout, port_base, address, host_pattern, exchange, gpus_per_task, gpu_bind, gpus_per_node, rpc_layer, only, run, enabled, tfslurm): "bogus" (see spank_tfslurm(8))'
assert_status 1 run_bounded 30 srun -N1 true
assert_eq "srun: error: $line" "$(grep 'tfslurm: ' <<<"$E2E_OUTPUT")" "srun's error line"
assert_status 1 run_bounded 30 sbatch --hold --wrap true
assert_eq "sbatch: error: $line" "$(grep 'tfslurm: ' <<<"$E2E_OUTPUT")" "sbatch's error line"

e2e_log "site defaults with enabled=always"
spank_install ps=1 only=tf,servers enabled=always
# shellcheck disable=SC2016 # expanded by the task's shell
print='printf "%s %s %s %s\n" "$SLURM_PROCID" "$(hostname)" "${TF_CONFIG-unset}" "${MASTER_ADDR-nomaster}"'
run_stdout 0 60 srun -N3 --ntasks-per-node=2 bash -c "$print"
check_tf_configs "$(without_last_field "$E2E_OUTPUT")" 6 1
assert_eq 6 "$(grep -c ' nomaster$' <<<"$E2E_OUTPUT")" "only=tf,servers must leave MASTER_ADDR unset"

e2e_log "TFSLURM_PS over the site default, --tfslurm over both"
run_stdout 0 60 env TFSLURM_PS=0 srun -N3 --ntasks-per-node=2 bash -c "$print"
check_tf_configs "$(without_last_field "$E2E_OUTPUT")" 6 0
run_stdout 0 60 env TFSLURM_PS=0 srun -N3 --ntasks-per-node=2 \
    --tfslurm=ps=2,only=tf+torch bash -c "$print"
check_tf_configs "$(without_last_field "$E2E_OUTPUT")" 6 2
assert_eq 0 "$(grep -c ' nomaster$' <<<"$E2E_OUTPUT")" "only=tf+torch must set MASTER_ADDR"

e2e_log "--tfslurm=off opts out; an impossible implicit plan leaves the task alone"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=off bash -c "$print"
assert_eq 6 "$(grep -c ' unset nomaster$' <<<"$E2E_OUTPUT")" "--tfslurm=off under enabled=always"
run_stdout 0 60 srun -N1 -n1 bash -c "$print"
assert_contains "$E2E_OUTPUT" " unset nomaster" "ps=1 on one task must leave the task alone"
e2e_log "...but fails it when asked for with --tfslurm"
run_stdout 1 60 srun -N1 -n1 --tfslurm true
assert_contains "$E2E_STDERR" "error: tfslurm: roles: 1 ps leave no rank for a worker" \
    "the task's error line"
assert_no_drain

spank_uninstall
no_leftovers 20
e2e_log "PASS"
