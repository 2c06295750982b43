#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Build tfslurm and run its tests that need no cluster with the toolchain of another Debian
# release, as a site on that release would: its GCC, CMake, fmt, CLI11, spdlog, Boost, Catch2,
# and its Slurm's headers (the SPANK plugin) and scontrol (the differential hostlist test).
#
#   scripts/build-in-release.sh --suite trixie|sid|bookworm [--jobs N] [--labels REGEX]
#       [--tests REGEX] [--no-tests] [--package DIR]
#
# The release runs from a root filesystem of that suite, built once with mmdebstrap from this
# machine's apt mirror and cached in /var/cache/tfslurm-build/<suite> (TFSLURM_BUILD_CACHE);
# the checkout is bound into it at the same path and built in build/<suite> of the checkout
# (build/<suite>-notests with --no-tests) with warnings as errors and the hardening flags of a
# site's build. The machine's own apt sources are never changed. It also checks that every
# package scripts/setup.sh asks for exists in that release. --package also makes the .deb and
# copies it with the SPANK plugin into DIR: `scripts/test-cluster build` builds another Slurm
# release's plugin and package this way, in the same root filesystem. Needs root (chroot).
set -euo pipefail

readonly prog=build-in-release.sh
# Suites this script knows (Debian 12, 13, unstable) and what each packages (for the usage text).
readonly -a k_suites=(bookworm trixie sid)
# The tests that need no cluster (ctest labels; e2e and package need the test cluster or the
# machine's dpkg tools). diff (tfslurm's hostlists against this release's scontrol) is left out
# by default: on 24.11 and 26.05 it reports the malformed lists on which those releases and
# tfslurm differ (issue #19's hostlist policy); --labels adds it.
readonly k_default_labels='^(unit|integration|fuzz-replay)$'
# A file at the top of every root filesystem this script built: what it was built with.
readonly k_stamp=.tfslurm-build-rootfs
# apt_mirror, rootfs_ensure and what the root filesystem holds (k_build_rootfs_packages).
# shellcheck source-path=SCRIPTDIR source=lib/rootfs.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/rootfs.sh"

# log, die, usage_or_die.
# shellcheck source-path=SCRIPTDIR source=lib/messages.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/messages.sh"

usage() {
    cat <<EOF
usage: scripts/build-in-release.sh --suite SUITE [--jobs N] [--labels REGEX] [--tests REGEX]
           [--no-tests] [--package DIR]

Builds tfslurm (warnings as errors) and runs the ctest labels unit, integration and
fuzz-replay inside a root filesystem of Debian SUITE (${k_suites[*]}), with that release's own
compiler and libraries; checks that every package of scripts/setup.sh exists there.

  --suite SUITE   bookworm (GCC 12, fmt 9, CLI11 2.1, Catch2 v2), trixie (GCC 14, fmt 10,
                  CLI11 2.4, Catch2 v3) or sid (GCC 16, fmt 11, CLI11 2.6, Catch2 v3)
  --jobs N        parallel compile and test jobs (default 2)
  --labels REGEX  the ctest labels to run (default '$k_default_labels'; add diff for
                  the differential hostlist test against this release's scontrol)
  --tests REGEX   only the tests of those labels whose name matches REGEX
  --no-tests      build without the tests (in build/SUITE-notests) and run none
  --package DIR   also make the two .deb (cpack) and copy them and the SPANK plugin into DIR

Settings: TFSLURM_BUILD_CACHE (default /var/cache/tfslurm-build) holds <suite>, the root
filesystem (about 1 GB, built once in about 8 minutes), and ccache-<suite>;
TFSLURM_TC_MIRROR: the Debian mirror (default: the one this machine's apt uses).
EOF
}

now() { date +%s; }

# in_root [--own-network] ROOT CMD...: CMD chrooted into ROOT (scripts/test-cluster.d/enter: a
# private mount namespace, gone with CMD) with the checkout, the ccache directory and the
# kernel's file systems bound at the same paths, and a clean environment; with --own-network,
# also in a network namespace of its own (scripts/lib/own-network: loopback only).
in_root() {
    local -a via=()
    if [[ $1 == --own-network ]]; then
        via=("$repo/scripts/lib/own-network")
        shift
    fi
    local root=$1
    shift
    "${via[@]}" "$repo/scripts/test-cluster.d/enter" "$root" /proc /sys /dev /tmp /etc/hosts "$repo" "$ccache_dir" -- \
        env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 TERM=dumb \
        CCACHE_DIR="$ccache_dir" CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=1 "$@"
}

main() {
    local suite='' jobs=2 tests='' labels=$k_default_labels with_tests=1 package=''
    while (($# > 0)); do
        case $1 in
        --suite=*) suite=${1#--suite=} ;;
        --package=*) package=${1#--package=} ;;
        --no-tests) with_tests=0 ;;
        --jobs=*) jobs=${1#--jobs=} ;;
        --tests=*) tests=${1#--tests=} ;;
        --labels=*) labels=${1#--labels=} ;;
        --suite | --jobs | --tests | --labels | --package)
            (($# >= 2)) || die "$1: expected a value"
            case $1 in
            --suite) suite=$2 ;;
            --package) package=$2 ;;
            --jobs) jobs=$2 ;;
            --tests) tests=$2 ;;
            --labels) labels=$2 ;;
            esac
            shift
            ;;
        *) usage_or_die "$1" ;;
        esac
        shift
    done
    [[ -n $suite ]] || {
        usage >&2
        die "--suite: expected one of ${k_suites[*]}"
    }
    local known=0 s
    for s in "${k_suites[@]}"; do
        [[ $s == "$suite" ]] && known=1
    done
    ((known)) || die "--suite: expected one of ${k_suites[*]}: \"$suite\""
    [[ $jobs =~ ^[1-9][0-9]?$ ]] || die "--jobs: expected a number from 1 to 99: \"$jobs\""
    if [[ -n $package ]]; then
        [[ -d $package ]] || die "--package: expected an existing directory: \"$package\""
        package=$(cd -- "$package" && pwd -P)
    fi
    (($(id -u) == 0)) || die "the root filesystem and chroot need root: run 'sudo scripts/$prog'"

    local cache=${TFSLURM_BUILD_CACHE:-/var/cache/tfslurm-build}
    [[ $cache =~ ^/[A-Za-z0-9._/-]+$ && $cache != *..* ]] ||
        die "TFSLURM_BUILD_CACHE: expected an absolute path of [A-Za-z0-9._/-]: \"$cache\""
    repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
    ccache_dir=${cache%/}/ccache-$suite
    mkdir -p -- "$ccache_dir"
    local root=${cache%/}/$suite build=$repo/build/$suite t_all t0 tests_option=ON
    if ((!with_tests)); then
        build=$repo/build/$suite-notests tests_option=OFF
    fi
    t_all=$(now)

    t0=$(now)
    rootfs_ensure "$root" "$k_stamp" "suite=$suite" "$suite" true "${k_build_rootfs_packages[@]}"
    local t_rootfs=$(($(now) - t0))

    # Every package scripts/setup.sh asks for exists in this release (no name only one release
    # has): its package lists, kept in the root filesystem, know each one.
    local -a wanted missing
    mapfile -t wanted < <("$repo/scripts/setup.sh" --list)
    ((${#wanted[@]} > 0)) || die "scripts/setup.sh --list printed no packages"
    # apt-cache policy NAME prints "  Candidate: VERSION" ("(none)": known but not installable),
    # and nothing for a name the release does not have.
    # shellcheck disable=SC2016 # expanded by the sh inside the root filesystem
    mapfile -t missing < <(in_root "$root" sh -c 'for p; do
        c=$(apt-cache policy "$p" 2>/dev/null | awk "/Candidate:/ { print \$2 }")
        if [ -z "$c" ] || [ "$c" = "(none)" ]; then echo "$p"; fi
    done' check-packages "${wanted[@]}")
    ((${#missing[@]} == 0)) ||
        die "Debian $suite has no package named ${missing[*]}, which scripts/setup.sh asks for"
    log "Debian $suite has every package scripts/setup.sh asks for"

    local -a versions
    mapfile -t versions < <(dpkg-query --admindir="$root/var/lib/dpkg" -W \
        -f='${Package} ${Version}\n' g++ cmake libfmt-dev libcli11-dev catch2 libspdlog-dev libboost-dev libslurm-dev)
    log "Debian $suite: $(IFS=','; printf '%s' "${versions[*]}" | sed 's/,/, /g')"

    t0=$(now)
    mkdir -p -- "$build"
    local ccache_launcher=''
    [[ -x $root/usr/bin/ccache ]] && ccache_launcher=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    # The hardening flags are a site's (the release preset's): the plugin and .deb that
    # --package makes are built the way a site builds them.
    in_root "$root" cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS="-D_FORTIFY_SOURCE=2 -fstack-protector-strong" \
        -DTFSLURM_WARNINGS_AS_ERRORS=ON -DTFSLURM_E2E=OFF -DTFSLURM_BUILD_BENCH=OFF \
        -DTFSLURM_BUILD_TESTS="$tests_option" $ccache_launcher >"$build.configure.log" 2>&1 || {
        cat -- "$build.configure.log" >&2
        die "cmake could not configure the build in Debian $suite (log: $build.configure.log)"
    }
    in_root "$root" cmake --build "$build" -j "$jobs" || die "the build failed in Debian $suite"
    local t_build=$(($(now) - t0))

    local t_tests=0
    if ((with_tests)); then
        t0=$(now)
        local -a select=(-L "$labels")
        [[ -n $tests ]] && select+=(-R "$tests")
        # Loopback of their own: test.sh runs them beside 22.05's suite, whose tests of
        # `run --local` use the same job ids, hence the same ports.
        in_root --own-network "$root" ctest --test-dir "$build" --output-on-failure -j "$jobs" "${select[@]}" ||
            die "tests failed in Debian $suite (build directory: $build)"
        t_tests=$(($(now) - t0))
    fi

    if [[ -n $package ]]; then
        # shellcheck disable=SC2016 # expanded by the sh inside the root filesystem
        in_root "$root" sh -c 'cd "$1" && rm -rf package && cpack -G DEB --config CPackConfig.cmake' \
            cpack "$build" >"$build.cpack.log" 2>&1 || {
            tail -n 20 -- "$build.cpack.log" >&2
            die "cpack could not make the .deb in Debian $suite (log: $build.cpack.log)"
        }
        # Two packages: the command (tfslurm) and the plugin (tfslurm-spank).
        local -a debs spank_debs
        mapfile -t debs < <(compgen -G "$build/package/tfslurm_*.deb")
        mapfile -t spank_debs < <(compgen -G "$build/package/tfslurm-spank_*.deb")
        ((${#debs[@]} == 1 && ${#spank_debs[@]} == 1)) ||
            die "cpack made ${#debs[@]} tfslurm_*.deb and ${#spank_debs[@]} tfslurm-spank_*.deb in $build/package, expected one of each"
        cp -- "$build/plugins/spank/spank_tfslurm.so" "${debs[0]}" "${spank_debs[0]}" "$package/"
        log "Debian $suite: the SPANK plugin, ${debs[0]##*/} and ${spank_debs[0]##*/} are in $package"
    fi

    log "Debian $suite: passed; root filesystem ${t_rootfs} s, build ${t_build} s, tests ${t_tests} s, total $(($(now) - t_all)) s"
}

main "$@"
