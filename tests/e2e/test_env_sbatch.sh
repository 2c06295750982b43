#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# sbatch job scripts: the batch script itself evals "$(tfslurm env --format export)" (it has no
# step, so tfslurm falls back to the job's variables and the script is rank 0, and says on
# stderr that tasks started with these variables would all be rank 0), and an inner srun step
# gives every task its own TF_CONFIG that names its real host, without that warning.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
checker="$(dirname -- "${BASH_SOURCE[0]}")/check_cluster.py"
dir=$(make_tmpdir)

cat >"$dir/job.sh" <<'JOB'
#!/bin/bash
set -euo pipefail
eval "$("$E2E_TFSLURM" env --format export --ps 1)"
printf 'batch %s %s %s\n' "$TFSLURM_ROLE" "$RANK" "$WORLD_SIZE"
srun bash -c 'eval "$("$E2E_TFSLURM" env --format export --ps 1)"; printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "$TF_CONFIG"' > "$OUT_DIR/tasks.txt" 2>"$OUT_DIR/tasks.err"
JOB
chmod +x "$dir/job.sh"

jid=$(OUT_DIR=$dir sbatch_submit -N3 --ntasks-per-node=2 --export=ALL -o "$dir/job.out" \
    -e "$dir/job.err" "$dir/job.sh")
rc=0
sbatch_wait "$jid" 120 || rc=$?
assert_eq 0 "$rc" "batch job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir/job.out" "$dir/job.err" 2>/dev/null)"
assert_eq "batch ps 0 6" "$(cat "$dir/job.out")" "the batch script's own view (rank 0 of the job)"
# shellcheck disable=SC2016 # the warning quotes a command line literally
assert_eq 'tfslurm: warning: batch script: not a task of a step: these variables describe rank 0 of the job'"'"'s 6 tasks, and every task started with them would be rank 0; set them in each task instead: srun bash -c '"'"'eval "$(tfslurm env)"; exec python train.py'"'" \
    "$(cat "$dir/job.err")" "the batch script is told it is not a task"
assert_eq "" "$(cat "$dir/tasks.err")" "tasks of the inner step get no warning"
summary=$(python3 "$checker" 6 <"$dir/tasks.txt") || fail "inner step: $summary"
assert_eq "ok 0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" "$summary" "inner step placement"

no_leftovers 20
e2e_log "PASS"
