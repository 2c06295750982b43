#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A lost node ends the step even when libslurm cannot be called (missing, or a Slurm release
# whose library calls this tfslurm does not know): as test_run_node_lost.sh, but every launcher
# is pointed at a libslurm that does not exist (TFSLURM_LIBSLURM). Rank 0's launcher then says
# so and which way it takes instead, `scancel <job>.<step>`, and srun still ends by itself (137:
# the cancel's SIGKILL, which rank 0's launcher waits for), leaving nothing behind.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
missing=$dir/no-such-libslurm.so
TFSLURM_LIBSLURM=$missing node_lost_step "$dir"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (connection closed); cancelling step $E2E_JOB.0 with scancel (libslurm cannot be called: libslurm: cannot load any of $missing: $missing: cannot open shared object file: No such file or directory)"
assert_eq 1 "$(grep -cxF "$line" "$dir/task-0.out")" "rank 0's launcher cancels the step with scancel and says why"$'\n'"$E2E_OUT"
assert_eq 0 "$(grep -c 'cannot cancel step' "$dir/task-0.out")" "scancel succeeded"$'\n'"$E2E_OUT"
assert_eq 137 "$E2E_RC" "srun ends by itself: the cancel killed the remaining tasks"$'\n'"$E2E_OUT"

no_leftovers 20
e2e_log "PASS"
