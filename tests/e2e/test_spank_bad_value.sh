#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# spank_tfslurm.so rejects a bad --tfslurm value where the user typed it: srun, sbatch and
# salloc exit non-zero at once with the plugin's one "tfslurm:" line, and no job is created.
# Likewise for a bad TFSLURM_* variable when --tfslurm is given.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin

spank_install enabled=option
name=e2e-spank-bad-$$

# no_job: no job named $name exists (a created job would still be listed: --hold keeps a batch
# job pending, and MinJobAge keeps finished ones visible for a while).
no_job() {
    local jobs
    jobs=$(timeout 10 squeue -h -n "$name" -o '%A %T' 2>&1) || fail "squeue failed: $jobs"
    assert_eq "" "$jobs" "a job was created for a rejected submission"
}

# rejected COMMAND LINE...: run CMD (bounded), expect a non-zero status and LINE as the only
# "tfslurm:" line of its output.
rejected() {
    local cmd=$1 line=$2 rc=0
    shift 2
    E2E_OUTPUT=$(timeout -k 5 30 "$cmd" "$@" 2>&1) || rc=$?
    ((rc != 0 && rc != 124)) || fail "$cmd $*: exit status $rc, expected a rejection: $E2E_OUTPUT"
    assert_eq "$line" "$(grep 'tfslurm: ' <<<"$E2E_OUTPUT" | grep -v 'Invalid --tfslurm')" \
        "$cmd $*: the plugin's error line"
    e2e_log "$cmd rejected it (status $rc): $line"
}

msg='tfslurm: --tfslurm ps: expected an integer from 0 to 4194304: "x"'
rejected srun "srun: error: $msg" -J "$name" -N1 --tfslurm=ps=x true
rejected sbatch "sbatch: error: $msg" -J "$name" --hold --tfslurm=ps=x --wrap true
rejected salloc "salloc: error: $msg" -J "$name" --tfslurm=ps=x true
no_job

rejected srun 'srun: error: tfslurm: --tfslurm: setting given twice: "ps" (give each setting once)' \
    -J "$name" -N1 --tfslurm=ps=1,ps=2 true
rejected sbatch 'sbatch: error: tfslurm: --tfslurm roles: expected a role: ps, worker, chief or evaluator: "boss"' \
    -J "$name" --hold --tfslurm=roles=ps+boss --wrap true
no_job

msg='tfslurm: TFSLURM_PS: expected an integer from 0 to 4194304: "two"'
rejected env "srun: error: $msg" TFSLURM_PS=two srun -J "$name" -N1 --tfslurm true
rejected env "sbatch: error: $msg" TFSLURM_PS=two sbatch -J "$name" --hold --tfslurm --wrap true
no_job

e2e_log "the same variable is ignored without --tfslurm (the plugin is not asked for)"
assert_status 0 env TFSLURM_PS=two timeout -k 5 30 srun -J "$name" -N1 true

no_leftovers 20
e2e_log "PASS"
