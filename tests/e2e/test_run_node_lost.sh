#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A node that dies ends the step: every process of the step on n3 (its launcher, its trainer and
# their supervisors, and the slurmstepd that would report the tasks' end) is killed with SIGKILL,
# as when the node crashes. Rank 0's launcher declares rank 2's launcher lost, the surviving
# trainers get their grace, then rank 0 cancels the step through Slurm (libslurm, loaded at run
# time) and says so in its line. Without that cancel srun waits for n3's tasks until someone
# runs scancel. The cancel SIGKILLs the remaining tasks (rank 0's launcher waits for that rather
# than race it), so srun exits 137, and nothing is left.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
node_lost_step "$dir"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (connection closed); cancelling step $E2E_JOB.0 through Slurm"
assert_eq 1 "$(grep -cxF "$line" "$dir/task-0.out")" "rank 0's launcher cancels the step and says so"$'\n'"$E2E_OUT"
assert_eq 0 "$(grep -c 'cancelling step' "$dir/task-1.out")" "only rank 0 cancels"$'\n'"$E2E_OUT"
assert_eq 137 "$E2E_RC" "srun ends by itself: the cancel killed the remaining tasks"$'\n'"$E2E_OUT"

no_leftovers 20
e2e_log "PASS"
