#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run the whole test suite on this machine (Debian 12, as root):
#   unit and CLI tests, fuzz-corpus replay, the differential test against scontrol,
#   end-to-end tests on a real 3-node Slurm cluster that ctest brings up and takes down
#   (scripts/test-cluster), some with real TensorFlow (scripts/setup-tensorflow.sh installs it
#   into a cached venv), the release-sensitive ones again on Slurm 24.11 and 26.05, the build
#   and the tests that need no cluster with Debian sid's own toolchain (scripts/build-in-release.sh),
#   then a short libFuzzer run of every parser (scripts/fuzz.sh).
# The cluster is taken down whatever happens, and nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the test cluster and the packages need root; re-running with sudo" >&2
    exec sudo --preserve-env=TFSLURM_FUZZ_SECONDS,TFSLURM_TEST_RELEASES,TFSLURM_TEST_TOOLCHAINS,CI "$0" "$@"
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

# The other Slurm releases (docs/test-cluster.md, "Other Slurm releases"): the release-sensitive
# end-to-end tests on clusters of 24.11 and 26.05 (TFSLURM_TEST_RELEASES; empty: none), each
# from its cached root filesystem (built on first use, about 3 minutes). Not the whole suite:
# the SPANK plugin is built for this machine's release only, and those root filesystems have no
# PyTorch. The e2e fixtures start and remove each cluster.
k_release_tests='^e2e_(cluster_smoke|cluster_release|env_layouts|env_pmi2|env_gpus|env_sbatch|run_het|run_failure|run_signals|run_kill_launcher|run_node_lost|run_node_lost_scancel|run_checkpoint|run_checkpoint_libslurm)$'
if scripts/test-cluster status >/dev/null 2>&1; then
    echo "test.sh: a test cluster started by hand is up: not replacing it with other Slurm releases" >&2
else
    for release in ${TFSLURM_TEST_RELEASES-24.11 26.05}; do
        scripts/test-cluster rootfs --slurm "$release"
        TFSLURM_TC_SLURM=$release ctest --preset dev --output-on-failure -R "$k_release_tests" || status=$?
        if [ "$status" -ne 0 ]; then
            echo "test.sh: ctest on Slurm $release failed (status $status)" >&2
            exit "$status"
        fi
    done
fi

# Other toolchains (README, "Building with each Debian release"): the whole build, warnings as
# errors, and the unit, CLI and fuzz-replay tests inside a root filesystem of each Debian suite
# of TFSLURM_TEST_TOOLCHAINS (default: sid, the newest GCC, fmt, CLI11 and CMake; trixie too by
# hand; empty: none), built once and cached. About 5 minutes for a cold build on 2 cores, under
# a minute with its ccache warm.
for suite in ${TFSLURM_TEST_TOOLCHAINS-sid}; do
    scripts/build-in-release.sh --suite "$suite" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "test.sh: the build or the tests with Debian $suite's toolchain failed (status $status)" >&2
        exit "$status"
    fi
done

scripts/fuzz.sh
echo "test.sh: all tests passed"
