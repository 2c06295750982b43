#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# srun --task-prolog with `tfslurm env --format task-prolog`: slurmstepd runs the prolog in each
# task's environment and sets every `export NAME=value` line of its stdout verbatim, so each task
# starts with its own TF_CONFIG (checked like every TF_CONFIG) and torch variables, without
# evaluating anything itself. TFSLURM_FORMAT works the same.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)
chmod 755 "$dir"

cat >"$dir/prolog.sh" <<PROLOG
#!/bin/bash
exec "$E2E_TFSLURM" env --format task-prolog --ps 1
PROLOG
cat >"$dir/prolog-variable.sh" <<PROLOG
#!/bin/bash
TFSLURM_FORMAT=task-prolog exec "$E2E_TFSLURM" env --ps 1
PROLOG
chmod 755 "$dir/prolog.sh" "$dir/prolog-variable.sh"

for prolog in prolog.sh prolog-variable.sh; do
    e2e_log "srun --task-prolog=$prolog"
    run_stdout 0 60 srun -N3 --ntasks-per-node=2 --task-prolog="$dir/$prolog" \
        bash -c "$SPANK_PRINT_TASK"
    check_tf_configs "$E2E_OUTPUT" 6 1
    # shellcheck disable=SC2016 # expanded by the task's shell
    run_stdout 0 60 srun -N3 --ntasks-per-node=2 --task-prolog="$dir/$prolog" \
        bash -c 'echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $TFSLURM_ROLE"'
    assert_eq "0 0 0 6 ps|1 1 1 6 worker|2 2 0 6 worker|3 3 1 6 worker|4 4 0 6 worker|5 5 1 6 worker" \
        "$(sort -n <<<"$E2E_OUTPUT" | paste -sd'|')" "torch variables from the task prolog"
done

no_leftovers 20
e2e_log "PASS"
