#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The test cluster works: its 9 smoke checks (srun layout, task environment, sbatch, a SPANK
# option through srun and sbatch, PMI2, GPUs, cross-node TCP, --resv-ports) pass, and nothing
# is left running on the nodes afterwards.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

rc=0
run_bounded 300 bash "$E2E_TEST_CLUSTER" smoke || rc=$?
assert_eq 0 "$rc" "scripts/test-cluster smoke failed (see the FAIL lines above)"
no_leftovers 20
e2e_log "PASS"
