#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# spank_tfslurm.so through sbatch and salloc (the allocator context): `sbatch --tfslurm=ps=1`
# leaves the batch script itself alone (it is no task of a step) and every inner srun step gets
# per-task TF_CONFIGs for its own layout; an inner srun may override (--tfslurm=...) or cancel
# (--tfslurm=off) the inherited value; salloc passes the option on in the same way. A bare
# --tfslurm (no value) reaches the job as the literal "(null)" (SLURM_SPANK_..._tfslurm_tfslurm):
# the inner steps take it as "no settings", with sbatch and with salloc.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin

spank_install enabled=option
dir=$(make_tmpdir)

cat >"$dir/job.sh" <<SCRIPT
#!/bin/bash
set -e
echo "batch \${TF_CONFIG-unset} \${SLURM_SPANK__SLURM_SPANK_OPTION_tfslurm_tfslurm-unset}"
srun bash -c '$SPANK_PRINT_TASK' >"$dir/step0.txt"
srun -N2 -n2 bash -c '$SPANK_PRINT_TASK' >"$dir/step1.txt"
srun --tfslurm=ps=2 bash -c '$SPANK_PRINT_TASK' >"$dir/step2.txt"
srun --tfslurm=off bash -c '$SPANK_PRINT_TASK' >"$dir/step3.txt"
SCRIPT

e2e_log "sbatch -N3 --ntasks-per-node=2 --tfslurm=ps=1 with four inner steps"
jid=$(sbatch_submit -N3 --ntasks-per-node=2 --tfslurm=ps=1 -o "$dir/batch.out" \
    -e "$dir/batch.err" "$dir/job.sh")
rc=0
sbatch_wait "$jid" 120 || rc=$?
assert_eq 0 "$rc" "batch job $jid ended with status $rc ($E2E_JOB_STATE): $(cat "$dir/batch.out" "$dir/batch.err")"

assert_eq "batch unset ps=1" "$(cat "$dir/batch.out")" \
    "the batch script must have no TF_CONFIG and must carry the option for its steps"
check_tf_configs "$(cat "$dir/step0.txt")" 6 1
check_tf_configs "$(cat "$dir/step1.txt")" 2 1
check_tf_configs "$(cat "$dir/step2.txt")" 6 2
assert_eq 6 "$(grep -c ' unset$' "$dir/step3.txt")" "inner srun --tfslurm=off still got TF_CONFIG"

e2e_log "salloc --tfslurm=ps=1 srun ..."
run_stdout 0 60 salloc -N3 --ntasks-per-node=2 --tfslurm=ps=1 srun bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1

e2e_log "sbatch --tfslurm (bare) with an inner srun"
cat >"$dir/bare.sh" <<SCRIPT
#!/bin/bash
set -e
echo "batch \${SLURM_SPANK__SLURM_SPANK_OPTION_tfslurm_tfslurm-unset}"
srun bash -c '$SPANK_PRINT_TASK' >"$dir/bare0.txt"
SCRIPT
jid=$(sbatch_submit -N3 --ntasks-per-node=2 --tfslurm -o "$dir/bare.out" -e "$dir/bare.err" \
    "$dir/bare.sh")
rc=0
sbatch_wait "$jid" 120 || rc=$?
assert_eq 0 "$rc" "bare --tfslurm: batch job $jid ended with status $rc ($E2E_JOB_STATE): $(cat "$dir/bare.out" "$dir/bare.err")"
assert_eq "batch (null)" "$(cat "$dir/bare.out")" "Slurm's spelling of a bare option in the job"
check_tf_configs "$(cat "$dir/bare0.txt")" 6 0

e2e_log "salloc --tfslurm (bare) srun ..."
run_stdout 0 60 salloc -N3 --ntasks-per-node=2 --tfslurm srun bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 0

no_leftovers 20
e2e_log "PASS"
