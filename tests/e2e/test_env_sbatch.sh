#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# sbatch job scripts: the batch script itself evals "$(tfslurm env --format export)" (it has no
# step, so tfslurm falls back to the job's variables and the script is rank 0), and an inner
# srun step gives every task its own TF_CONFIG that names its real host.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
checker="$(dirname -- "${BASH_SOURCE[0]}")/check_cluster.py"
dir=$(make_tmpdir)

cat >"$dir/job.sh" <<'JOB'
#!/bin/bash
set -euo pipefail
eval "$("$TFSLURM_BIN" env --format export --ps 1)"
printf 'batch %s %s %s\n' "$TFSLURM_ROLE" "$RANK" "$WORLD_SIZE"
srun bash -c 'eval "$("$TFSLURM_BIN" env --format export --ps 1)"; printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "$TF_CONFIG"' > "$OUT_DIR/tasks.txt"
JOB
chmod +x "$dir/job.sh"

jid=$(OUT_DIR=$dir sbatch_submit -N3 --ntasks-per-node=2 --export=ALL -o "$dir/job.out" "$dir/job.sh")
rc=0
sbatch_wait "$jid" 120 || rc=$?
assert_eq 0 "$rc" "batch job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir/job.out" 2>/dev/null)"
assert_eq "batch ps 0 6" "$(cat "$dir/job.out")" "the batch script's own view (rank 0 of the job)"
summary=$(python3 "$checker" 6 <"$dir/tasks.txt") || fail "inner step: $summary"
assert_eq "ok 0:n1 1:n1 2:n2 3:n2 4:n3 5:n3" "$summary" "inner step placement"

no_leftovers 20
e2e_log "PASS"
