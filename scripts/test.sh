#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run the whole test suite on this machine (Debian 12, as root):
#   unit and CLI tests, fuzz-corpus replay, the differential test against scontrol,
#   end-to-end tests on a real 3-node Slurm cluster that ctest brings up and takes down
#   (scripts/test-cluster), some with real TensorFlow (scripts/setup-tensorflow.sh installs it
#   into a cached venv), then a short libFuzzer run of every parser (scripts/fuzz.sh).
# The cluster is taken down whatever happens, and nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the test cluster and the packages need root; re-running with sudo" >&2
    exec sudo --preserve-env=TFSLURM_FUZZ_SECONDS,CI "$0" "$@"
fi

scripts/build.sh
# TensorFlow for the end-to-end tests that run it (a venv outside the repository, cached).
scripts/setup-tensorflow.sh >/dev/null

# Take the test cluster down afterwards unless it was already up (started by hand).
if scripts/test-cluster status >/dev/null 2>&1; then
    cleanup() { :; }
else
    cleanup() { scripts/test-cluster down >/dev/null 2>&1 || true; }
fi
trap cleanup EXIT INT TERM

status=0
ctest --preset dev --output-on-failure -j2 || status=$?
if [ "$status" -ne 0 ]; then
    echo "test.sh: ctest failed (status $status)" >&2
    exit "$status"
fi

scripts/fuzz.sh
echo "test.sh: all tests passed"
