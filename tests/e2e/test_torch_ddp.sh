#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# PyTorch for real across the three nodes: examples/torch-ddp/train.py (gloo DDP: an all-reduce
# and one SGD step) with the variables tfslurm gives each task, through `tfslurm env` (the
# example's job script, under sbatch), `tfslurm run`, the SPANK plugin (`srun --tfslurm` and
# the sbatch-tfslurm example) and a task prolog (the task-prolog example); plus the
# horovod-mpi example under `srun --mpi=pmi2`. Every rank prints its rank, world size, node,
# the all-reduce (1+2+3) and the weight after the step (the same on every rank only if DDP
# averaged the gradients of all three). Wrong variables cannot pass: a wrong WORLD_SIZE or
# MASTER_ADDR makes the rendezvous time out (--timeout 30 in the trainer, bounded here), a
# wrong RANK or LOCAL_RANK changes the lines.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_examples
dir=$(make_tmpdir)

n=("${TC_NODE_ARRAY[@]}")
expected=$(printf '%s\n' \
    "ddp: rank 0/3 local 0 on ${n[0]}: all_reduce 6.0 weight 0.0667" \
    "ddp: rank 1/3 local 0 on ${n[1]}: all_reduce 6.0 weight 0.0667" \
    "ddp: rank 2/3 local 0 on ${n[2]}: all_reduce 6.0 weight 0.0667")

# batch_job NAME EXAMPLE_DIR: submit the example's job.sbatch from its directory, as its
# comment says, on the three nodes; print its "ddp:" lines once it ended 0.
batch_job() {
    local jid rc=0
    jid=$(sbatch_submit -D "$EXAMPLES/$2" -o "$dir/$1.out" "$EXAMPLES/$2/job.sbatch")
    sbatch_wait "$jid" 120 || rc=$?
    assert_eq 0 "$rc" "$2/job.sbatch: job $jid ended $E2E_JOB_STATE:"$'\n'"$(cat "$dir/$1.out")"
    grep '^ddp:' "$dir/$1.out" | sort
}

e2e_log "torch-ddp/job.sbatch: srun bash -c 'eval \"\$(tfslurm env)\" && exec python3 train.py'"
assert_eq "$expected" "$(batch_job env torch-ddp)" "DDP through tfslurm env"

e2e_log "srun tfslurm run -- python3 torch-ddp/train.py"
run_stdout 0 90 srun -N3 --ntasks-per-node=1 tfslurm run --auth munge --grace 5 -- \
    python3 "$EXAMPLES/torch-ddp/train.py" --timeout 30
assert_eq "$expected" "$(grep '^ddp:' <<<"$E2E_OUTPUT" | sort)" "DDP through tfslurm run"

e2e_log "task-prolog/job.sbatch: srun --task-prolog=prolog.sh python3 ../torch-ddp/train.py"
assert_eq "$expected" "$(batch_job prolog task-prolog)" "DDP through a task prolog"

e2e_log "horovod-mpi/job.sbatch: srun --mpi=pmi2 ... (tfslurm's ranks are PMI's)"
jid=$(sbatch_submit -D "$EXAMPLES/horovod-mpi" -o "$dir/mpi.out" "$EXAMPLES/horovod-mpi/job.sbatch")
rc=0
sbatch_wait "$jid" 120 || rc=$?
assert_eq 0 "$rc" "horovod-mpi/job.sbatch: job $jid ended $E2E_JOB_STATE:"$'\n'"$(cat "$dir/mpi.out")"
assert_eq "$(printf '%s\n' \
    "mpi: rank 0/3 (pmi 0/3) on ${n[0]}: all_reduce 6.0" \
    "mpi: rank 1/3 (pmi 1/3) on ${n[1]}: all_reduce 6.0" \
    "mpi: rank 2/3 (pmi 2/3) on ${n[2]}: all_reduce 6.0")" \
    "$(grep '^mpi:' "$dir/mpi.out" | sort)" "the horovod-mpi example"

if [[ -n ${E2E_SPANK_PLUGIN:-} ]]; then
    use_spank_plugin
    spank_install enabled=option

    e2e_log "srun --tfslurm python3 torch-ddp/train.py"
    run_stdout 0 90 srun -N3 --ntasks-per-node=1 --tfslurm \
        python3 "$EXAMPLES/torch-ddp/train.py" --timeout 30
    assert_eq "$expected" "$(grep '^ddp:' <<<"$E2E_OUTPUT" | sort)" "DDP through srun --tfslurm"

    e2e_log "sbatch-tfslurm/job.sbatch: #SBATCH --tfslurm"
    assert_eq "$expected" "$(batch_job spank sbatch-tfslurm)" "DDP through sbatch --tfslurm"
    spank_uninstall
else
    e2e_log "the SPANK plugin is not built: its two cases were not run"
fi

no_leftovers 20
e2e_log "PASS"
