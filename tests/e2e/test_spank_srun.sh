#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# spank_tfslurm.so through srun: `srun --tfslurm=ps=1` gives every task a TF_CONFIG whose own
# entry names the host it runs on and on which all tasks agree; without the option (or with
# --tfslurm=off) nothing is set; TFSLURM_* variables sit between the plugin's defaults and the
# option; a plan that cannot work fails the tasks with one "tfslurm:" line and drains no node.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin

spank_install enabled=option

e2e_log "srun --help lists --tfslurm"
assert_status 0 run_bounded 30 srun --help
assert_contains "$E2E_OUTPUT" "--tfslurm=SPEC" "srun --help does not list the option"

e2e_log "srun -N3 -n6 --tfslurm=ps=1"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1
# Rank 0 is the ps (ps_placement=first) and runs on the first node.
assert_contains "$E2E_OUTPUT" "0 ${TC_NODE_ARRAY[0]} " "rank 0 does not run on the first node"
rank0=$(grep '^0 ' <<<"$E2E_OUTPUT")
assert_contains "$rank0" '"task":{"type":"ps","index":0}' "rank 0 is not ps 0"

e2e_log "srun -n5 -m arbitrary --tfslurm=ps=1: ranks where SLURM_HOSTFILE puts them"
hostfile=$(make_tmpdir)/hostfile
printf 'n2\nn1\nn2\nn3\nn1\n' >"$hostfile"
run_stdout 0 60 env SLURM_HOSTFILE="$hostfile" srun -n5 -m arbitrary --tfslurm=ps=1 \
    bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 5 1
assert_eq "0 n2 1 n1 2 n2 3 n3 4 n1" "$(sort -n <<<"$E2E_OUTPUT" | cut -d' ' -f1,2 | paste -sd' ')" \
    "ranks of the arbitrary step"

e2e_log "the other variables of tfslurm env, per task"
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=ps=1 bash -c \
    'echo "$SLURM_PROCID $TFSLURM_RANK $TFSLURM_ROLE $TFSLURM_TASK_TYPE:$TFSLURM_TASK_INDEX $RANK $WORLD_SIZE $MASTER_ADDR"'
expected=$(printf '%s\n' \
    "0 0 ps ps:0 0 6 ${TC_NODE_ARRAY[0]}" \
    "1 1 worker worker:0 1 6 ${TC_NODE_ARRAY[0]}" \
    "2 2 worker worker:1 2 6 ${TC_NODE_ARRAY[0]}" \
    "3 3 worker worker:2 3 6 ${TC_NODE_ARRAY[0]}" \
    "4 4 worker worker:3 4 6 ${TC_NODE_ARRAY[0]}" \
    "5 5 worker worker:4 5 6 ${TC_NODE_ARRAY[0]}")
assert_eq "$expected" "$(sort -n <<<"$E2E_OUTPUT")" "per-task variables"

e2e_log "bare --tfslurm, chief and roles lists"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 0
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=roles=ps*2+chief+worker*3 \
    bash -c 'echo "$SLURM_PROCID $TFSLURM_ROLE"'
assert_eq "$(printf '%s\n' '0 ps' '1 ps' '2 chief' '3 worker' '4 worker' '5 worker')" \
    "$(sort -n <<<"$E2E_OUTPUT")" "roles=ps*2+chief+worker*3"

e2e_log "without --tfslurm and with --tfslurm=off nothing is set"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 bash -c "$SPANK_PRINT_TASK"
assert_eq 6 "$(grep -c ' unset$' <<<"$E2E_OUTPUT")" "TF_CONFIG set without --tfslurm"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=off bash -c "$SPANK_PRINT_TASK"
assert_eq 6 "$(grep -c ' unset$' <<<"$E2E_OUTPUT")" "TF_CONFIG set with --tfslurm=off"

e2e_log "precedence: --tfslurm > TFSLURM_PS > defaults"
run_stdout 0 60 env TFSLURM_PS=2 srun -N3 --ntasks-per-node=2 --tfslurm \
    bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 2
run_stdout 0 60 env TFSLURM_PS=2 srun -N3 --ntasks-per-node=2 --tfslurm=ps=0 \
    bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 0

e2e_log "a misspelt TFSLURM_* variable is named once, by srun, and changes nothing"
run_stdout 0 60 env TFSLURM_PSS=2 srun -N3 --ntasks-per-node=2 --tfslurm \
    bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 0
assert_eq "srun: tfslurm: warning: TFSLURM_PSS: not a tfslurm variable, ignored (did you mean TFSLURM_PS?)" \
    "$(grep 'tfslurm: warning' <<<"$E2E_STDERR")" "srun's warning"

e2e_log "a plan that cannot work fails the tasks, with one tfslurm line per task"
run_stdout 1 60 srun -N2 --ntasks-per-node=1 --tfslurm=ps=2 true
# slurmstepd's prefix: `slurmstepd-<node>:` up to 24.11, a time stamp `[2026-11-26T14:32:34.130]` in 26.05.
assert_eq 2 "$(grep -c -E '^(slurmstepd-[^:]*:|\[[0-9T:.-]+\]) error: tfslurm: roles: 2 ps leave no rank for a worker' \
    <<<"$E2E_STDERR")" "the error line of each task:"$'\n'"$E2E_STDERR"
assert_no_drain

no_leftovers 20
e2e_log "PASS"
