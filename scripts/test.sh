#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build and run the whole test suite on this machine (Debian 12, as root):
#   unit and CLI tests, fuzz-corpus replay, the differential test against scontrol,
#   end-to-end tests on a real 3-node Slurm cluster that ctest brings up and takes down
#   (scripts/test-cluster), some with real TensorFlow (scripts/setup-tensorflow.sh installs it
#   into a cached venv), then the whole end-to-end suite again on Slurm 26.05 (but TensorFlow)
#   and the release-sensitive tests on 24.11 (the build and the tests that need no cluster with
#   Debian sid's own toolchain come with 26.05's build), a short libFuzzer run of every
#   parser (scripts/fuzz.sh), and the tests that need no cluster under ASan and UBSan.
# The end-to-end suites mostly wait on Slurm, so the work that needs no cluster runs beside
# them, niced: the other releases' builds and root filesystems beside 22.05's suite, fuzz and
# the sanitizers' build and tests beside the other releases' suites (docs/test-cluster.md, "How long the test command takes").
# The cluster is taken down whatever happens, and nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the test cluster and the packages need root; re-running with sudo" >&2
    exec sudo --preserve-env=TFSLURM_FUZZ_SECONDS,TFSLURM_TEST_RELEASES,TFSLURM_TEST_TOOLCHAINS,CI "$0" "$@"
fi

# stage NAME: end the stage before (its time on stderr, "test.sh: stage <name>: <s> s") and
# start NAME; docs/test-cluster.md ("How long the test command takes") lists the stages.
stage_name='' stage_start=$SECONDS stage_tag=''
stage() {
    if [[ -n $stage_name ]]; then
        printf 'test.sh: stage %s%s: %d s\n' "$stage_name" "$stage_tag" $((SECONDS - stage_start)) >&2
    fi
    stage_name=$1 stage_start=$SECONDS
}

stage "setup and the dev build"
scripts/build.sh
# TensorFlow for the end-to-end tests that run it (a venv outside the repository, cached).
stage "TensorFlow venv"
scripts/setup-tensorflow.sh >/dev/null
# Take the test cluster down afterwards unless it was already up (started by hand), and stop
# whatever still runs beside the foreground (below) by its process group.
beside_pid=''
stop_beside() {
    if [[ -n $beside_pid ]]; then
        kill -TERM -- "-$beside_pid" 2>/dev/null || true
        wait "$beside_pid" 2>/dev/null || true
        beside_pid=''
    fi
}
if scripts/test-cluster status >/dev/null 2>&1; then
    hand_cluster=1
    cleanup() { stop_beside; }
else
    hand_cluster=0
    cleanup() {
        stop_beside
        scripts/test-cluster down >/dev/null 2>&1 || true
    }
fi
trap cleanup EXIT
trap 'exit 130' INT TERM

# The other Slurm releases (docs/test-cluster.md, "Other Slurm releases"), each from its cached
# root filesystem (built on first use); the e2e fixtures start and remove each cluster.
# TFSLURM_TEST_RELEASES chooses them (default "24.11 26.05"; empty: none); a cluster started by
# hand is not replaced by them.
releases=${TFSLURM_TEST_RELEASES-24.11 26.05}
if ((hand_cluster)) && [[ -n ${releases// /} ]]; then
    echo "test.sh: a test cluster started by hand is up: not replacing it with other Slurm releases" >&2
    releases=''
fi

# beside NAME COMMAND...: run COMMAND in the background, in a process group of its own (so that
# cleanup stops all of it), niced so that the foreground's tests keep the processors they ask
# for, its output in build/test-beside.log and its stage times ("test.sh: stage NAME (beside):
# N s") there; beside_wait prints that log and fails with it. The end-to-end suites mostly wait
# on Slurm: the builds, the root filesystems and the fuzz run fill those waits (issue #32).
beside_log=build/test-beside.log
beside() {
    local name=$1
    shift
    mkdir -p build
    printf 'test.sh: beside the foreground: %s\n' "$name" >&2
    set -m
    (
        trap - EXIT INT TERM
        renice -n 19 -p "$BASHPID" >/dev/null
        ionice -c 2 -n 7 -p "$BASHPID"
        stage_name='' stage_tag=' (beside)'
        "$@"
        stage ''
    ) >"$beside_log" 2>&1 </dev/null &
    beside_pid=$!
    set +m
}
beside_wait() {
    local rc=0 t0=$SECONDS
    [[ -n $beside_pid ]] || return 0
    wait "$beside_pid" || rc=$?
    beside_pid=''
    cat -- "$beside_log" >&2
    printf 'test.sh: waited %d s for the background stages\n' $((SECONDS - t0)) >&2
    if ((rc != 0)); then
        echo "test.sh: a background stage failed (status $rc; its output is above, in $beside_log)" >&2
        exit "$rc"
    fi
}

# Beside 22.05's suite: tfslurm built with Slurm 24.11's and 26.05's own toolchains and
# headers (their SPANK plugin and .deb; 24.11's is also the foreign plugin of e2e_spank_release
# on 22.05, which waits on the build's lock if it comes first), each in the root filesystem of
# its Debian suite that scripts/build-in-release.sh keeps: built once, then again only when the
# sources change. 26.05's build, with Debian sid's toolchain (the newest GCC, fmt, CLI11 and
# CMake; warnings as errors), also builds the tests and runs those that need no cluster
# (README, "Building with each Debian release"). Then the root filesystems of the releases
# that run their suites below.
other_builds() {
    stage "the 24.11 build (trixie)"
    scripts/test-cluster build --slurm 24.11 >/dev/null
    stage "the 26.05 build and its tests (sid)"
    scripts/test-cluster build --slurm 26.05 --tests >/dev/null
    local release
    for release in $releases; do
        stage "the $release root filesystem"
        scripts/test-cluster rootfs --slurm "$release"
    done
}
status=0
stage "ctest on Slurm 22.05 (every test)"
beside "the builds and root filesystems of the other releases" other_builds
ctest --preset dev --output-on-failure -j2 || status=$?
if [ "$status" -ne 0 ]; then
    echo "test.sh: ctest failed (status $status)" >&2
    exit "$status"
fi
stage "waiting for the builds and root filesystems beside it"
beside_wait

# Beside the other releases' suites: a short libFuzzer run of every parser (scripts/fuzz.sh),
# then the unit, CLI and fuzz-replay tests built with clang's AddressSanitizer and
# UndefinedBehaviorSanitizer (the asan preset: any report aborts the test that made it, a leak
# included), on a loopback of their own (scripts/lib/own-network: the tests of `run --local`
# take ports derived from fixed job ids, and no other copy of them may hold those). Its output
# goes to build/asan-tests.log, whose end is printed if it fails.
fuzz_stage() {
    stage "fuzz"
    scripts/fuzz.sh
}
sanitizer_stage() {
    stage "ASan and UBSan: the build and the tests that need no cluster"
    local log=build/asan-tests.log
    if ! { cmake --preset asan && cmake --build --preset asan &&
        scripts/lib/own-network ctest --preset asan -j2; } \
        >"$log" 2>&1; then
        echo "test.sh: the asan build or its tests failed; the end of $log:" >&2
        tail -n 200 -- "$log" >&2
        return 1
    fi
}
no_cluster_stages() {
    fuzz_stage
    sanitizer_stage
}

# CTest labels choose each release's tests (tests/e2e/CMakeLists.txt says why each test has its
# label):
# - 26.05, the newest: the whole end-to-end suite but the tests that need this machine's Python
#   stack (label host_python: TensorFlow's, and the PyTorch RPC one).
# - 24.11 (between the two, which are tested whole): the release-sensitive tests (label release).
k_full_releases=' 26.05 '
for release in $releases; do
    stage "ctest on Slurm $release"
    [[ -n $beside_pid ]] || beside "fuzz, then the sanitizers' tests" no_cluster_stages
    if [[ $k_full_releases == *" $release "* ]]; then
        tests=(-L '^e2e$' -LE '^host_python$')
    else
        tests=(-L '^release$')
    fi
    TFSLURM_TC_SLURM=$release ctest --preset dev --output-on-failure "${tests[@]}" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "test.sh: ctest on Slurm $release failed (status $status)" >&2
        exit "$status"
    fi
done

# More toolchains (README, "Building with each Debian release"): the whole build, warnings as
# errors, and the unit, CLI and fuzz-replay tests inside a root filesystem of each Debian suite
# of TFSLURM_TEST_TOOLCHAINS (default: none, sid's is checked by 26.05's build above; e.g.
# "trixie bookworm"), built once and cached. About 5 minutes for a cold build on 2 cores, under
# a minute with its ccache warm.
for suite in ${TFSLURM_TEST_TOOLCHAINS-}; do
    stage "the $suite toolchain"
    scripts/build-in-release.sh --suite "$suite" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "test.sh: the build or the tests with Debian $suite's toolchain failed (status $status)" >&2
        exit "$status"
    fi
done

if [[ -z $beside_pid ]]; then
    no_cluster_stages
else
    stage "waiting for fuzz and the sanitizers' tests beside them"
    beside_wait
fi
stage ""
echo "test.sh: all tests passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
