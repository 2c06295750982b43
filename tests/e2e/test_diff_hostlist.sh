#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The differential hostlist test (tests/diff, tfslurm_diff_hostlist) against the scontrol of
# the cluster's Slurm release: tfslurm's grammar is Slurm's since 23.02.5 (man page, HOSTLISTS),
# so every difference with this release must be one of the documented ones, and the oracle
# must really be this release's scontrol. scripts/test.sh runs it on 22.05, 24.11 and 26.05.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
diff_bin=$E2E_BUILD_DIR/tests/diff/tfslurm_diff_hostlist
[[ -x $diff_bin ]] || fail "$diff_bin is not built (TFSLURM_BUILD_TESTS=ON)"

rc=0
out=$(run_bounded 300 "${E2E_TC_EXEC[@]}" "$diff_bin" 2>&1) || rc=$?
((rc == 0)) || fail "tfslurm_diff_hostlist exited with status $rc:"$'\n'"$out"
oracle=$(grep -m1 '^oracle: ' <<<"$out" || true)
[[ $oracle =~ \(slurm(-wlm)?\ ${TC_SLURM//./\\.}\.[0-9]+\)$ ]] ||
    fail "the oracle is not Slurm $TC_SLURM's scontrol: \"$oracle\""
assert_eq PASS "$(tail -n 1 <<<"$out")" "every difference with Slurm $TC_SLURM is documented"
e2e_log "hostlists agree with Slurm $TC_SLURM's scontrol but for the documented differences"
