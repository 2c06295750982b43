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
# What the root filesystem holds: building the library, the CLI, the SPANK plugin and the tests
# (scripts/setup.sh's build packages less the linters and the clang tools), what the tests run
# (scontrol, python3, readelf, ps, ip), ccache, and dpkg-dev for the .deb (dpkg-shlibdeps).
readonly -a k_packages=(g++ cmake make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
    libboost-dev catch2 libsodium-dev libmunge-dev libpmi2-0-dev python3 slurm-client libslurm-dev
    ccache procps psmisc iproute2 util-linux bsdutils groff-base file binutils dpkg-dev)
# The tests that need no cluster (ctest labels; e2e and package need the test cluster or the
# machine's dpkg tools). diff (tfslurm's hostlists against this release's scontrol) is left out
# by default: on 24.11 and 26.05 it reports the malformed lists on which those releases and
# tfslurm differ (issue #19's hostlist policy); --labels adds it.
readonly k_default_labels='^(unit|integration|fuzz-replay)$'
# A file at the top of every root filesystem this script built: what it was built with.
readonly k_stamp=.tfslurm-build-rootfs

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$prog" "$*" >&2
    exit 1
}

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
  --package DIR   also make the .deb (cpack) and copy it and the SPANK plugin into DIR

Settings: TFSLURM_BUILD_CACHE (default /var/cache/tfslurm-build) holds <suite>, the root
filesystem (about 1 GB, built once in about 8 minutes), and ccache-<suite>;
TFSLURM_TC_MIRROR: the Debian mirror (default: the one this machine's apt uses).
EOF
}

now() { date +%s; }

# apt_mirror: the Debian mirror this machine's apt uses (as scripts/test-cluster finds it).
apt_mirror() {
    if [[ -n ${TFSLURM_TC_MIRROR:-} ]]; then
        printf '%s' "$TFSLURM_TC_MIRROR"
        return 0
    fi
    local file line
    for file in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $file ]] || continue
        while IFS= read -r line; do
            if [[ $line =~ ^URIs:[[:space:]]*([^[:space:]]+/debian)/?$ ]]; then
                printf '%s' "${BASH_REMATCH[1]}"
                return 0
            fi
            if [[ $line =~ ^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+/debian)/?[[:space:]] ]]; then
                printf '%s' "${BASH_REMATCH[2]}"
                return 0
            fi
        done <"$file"
    done
    printf '%s' http://deb.debian.org/debian
}

# ensure_rootfs ROOT SUITE: build ROOT once (under a lock, so that two runs never build the same
# one). The package lists stay in it: they tell which packages the release has. A root
# filesystem of the suite built with an older package list gets the new packages installed.
ensure_rootfs() {
    local root=$1 suite=$2 want
    want="suite=$suite packages=${k_packages[*]}"
    [[ -f $root/$k_stamp && $(<"$root/$k_stamp") == "$want" ]] && return 0
    mkdir -p -- "${root%/*}"
    local fd
    exec {fd}>"$root.lock"
    flock -w 1800 "$fd" || die "another build of $root has held $root.lock for 30 minutes"
    if [[ -f $root/$k_stamp && $(<"$root/$k_stamp") == "$want" ]]; then
        exec {fd}>&-
        return 0
    fi
    if [[ -f $root/$k_stamp && $(<"$root/$k_stamp") == "suite=$suite "* ]]; then
        log "installing the packages that the root filesystem of Debian $suite lacks (log: $root.log)"
        # shellcheck disable=SC2016 # expanded by the sh inside the root filesystem
        in_root "$root" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "$@"' install "${k_packages[@]}" \
            >"$root.log" 2>&1 || {
            exec {fd}>&-
            tail -n 20 -- "$root.log" >&2
            die "apt-get could not install the packages in $root (log: $root.log)"
        }
        printf '%s\n' "$want" >"$root/$k_stamp"
        exec {fd}>&-
        return 0
    fi
    command -v mmdebstrap >/dev/null || {
        exec {fd}>&-
        die "building a root filesystem of Debian $suite needs mmdebstrap: apt-get install mmdebstrap"
    }
    local mirror opts='' t0 packages
    mirror=$(apt_mirror)
    # sid's index may be past its Valid-Until date on a mirror snapshot: that suite only may be.
    [[ $suite == sid ]] && opts='[check-valid-until=no] '
    packages=$(
        IFS=,
        printf '%s' "${k_packages[*]}"
    )
    t0=$(now)
    log "building a root filesystem of Debian $suite in $root (once, several minutes; log: $root.log)"
    rm -rf -- "$root" "$root.tmp"
    if ! mmdebstrap --variant=apt --skip=cleanup/apt/lists --include="$packages" "$suite" \
        "$root.tmp" "deb ${opts}$mirror $suite main" >"$root.log" 2>&1; then
        rm -rf -- "$root.tmp"
        exec {fd}>&-
        tail -n 20 -- "$root.log" >&2
        die "mmdebstrap could not build the root filesystem of Debian $suite from $mirror (log: $root.log)"
    fi
    printf '%s\n' "$want" >"$root.tmp/$k_stamp"
    mv -- "$root.tmp" "$root"
    exec {fd}>&-
    log "root filesystem of Debian $suite ready in $(($(now) - t0)) s ($(du -sh -- "$root" | cut -f1))"
}

# in_root ROOT CMD...: CMD chrooted into ROOT (scripts/test-cluster.d/enter: a private mount
# namespace, gone with CMD) with the checkout, the ccache directory and the kernel's file
# systems bound at the same paths, and a clean environment.
in_root() {
    local root=$1
    shift
    "$repo/scripts/test-cluster.d/enter" "$root" /proc /sys /dev /tmp /etc/hosts "$repo" "$ccache_dir" -- \
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
        -h | --help | help)
            usage
            return 0
            ;;
        *)
            usage >&2
            die "unknown argument: \"$1\""
            ;;
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
    ensure_rootfs "$root" "$suite"
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
        in_root "$root" ctest --test-dir "$build" --output-on-failure -j "$jobs" "${select[@]}" ||
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
        local -a debs
        mapfile -t debs < <(compgen -G "$build/package/tfslurm_*.deb")
        ((${#debs[@]} == 1)) || die "cpack made ${#debs[@]} packages named tfslurm_*.deb in $build/package, expected 1"
        cp -- "$build/plugins/spank/spank_tfslurm.so" "${debs[0]}" "$package/"
        log "Debian $suite: the SPANK plugin and ${debs[0]##*/} are in $package"
    fi

    log "Debian $suite: passed; root filesystem ${t_rootfs} s, build ${t_build} s, tests ${t_tests} s, total $(($(now) - t_all)) s"
}

main "$@"
