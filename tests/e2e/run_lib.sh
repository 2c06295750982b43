#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Shared by the tests/e2e/test_run_*.sh scripts (sourced after lib.sh): the fake TensorFlow
# trainer, MUNGE through the test cluster's own munged, and helpers to find launchers.
# shellcheck disable=SC2034 # variables used by the sourcing scripts

[[ -n ${TFSLURM_TRAINER:-} && -x ${TFSLURM_TRAINER:-} ]] ||
    fail "TFSLURM_TRAINER is not an executable (\"${TFSLURM_TRAINER:-}\"); run the test through ctest"
require_tfslurm
# The launchers authenticate with MUNGE credentials from the cluster's private munged.
export TFSLURM_MUNGE_SOCKET="$TC_DIR/munge/run/munge.socket"
export TFSLURM_TRAINER TFSLURM_BIN

# launcher_pids NODE: pids of the tfslurm launchers ("tfslurm run ...") running on NODE.
launcher_pids() {
    local pid exe arg1
    while read -r pid; do
        [[ -n $pid ]] || continue
        exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 1p) || continue
        arg1=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 2p) || continue
        [[ $exe == "$TFSLURM_BIN" && $arg1 == run ]] && printf '%s\n' "$pid"
    done < <(ip netns pids "$TC_NS_PREFIX$1" 2>/dev/null || true)
}

# wait_for_lines PATTERN COUNT SECONDS FILE...: wait until the FILEs together have COUNT lines
# matching PATTERN (files that do not exist yet count as empty).
wait_for_lines() {
    local pattern=$1 count=$2 secs=$3 i
    shift 3
    for ((i = 0; i < secs * 10; i++)); do
        (($(cat -- "$@" 2>/dev/null | grep -c -- "$pattern" || true) >= count)) && return 0
        sleep 0.1
    done
    fail "waited $secs s for $count lines matching '$pattern' in $*:"$'\n'"$(cat -- "$@" 2>/dev/null)"
}
