#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Install the Debian packages that tfslurm's build, tests and test cluster need (Debian 12 and
# 13 and sid: every name is one that each of them packages, none versioned).
#
#   scripts/setup.sh                  everything (build, lint, unit and end-to-end tests)
#   scripts/setup.sh --demo           only what the demo needs: build the tfslurm binary
#   scripts/setup.sh --cluster-only   only what scripts/test-cluster needs (Slurm, munge, tools)
#   scripts/setup.sh --check          list missing packages, install nothing (exit 1 if any)
#   scripts/setup.sh --list           print the packages wanted, one a line (with the others too)
#
# Idempotent: when every package is installed it returns at once without touching apt.
# Never starts daemons: the packages' maintainer scripts are blocked by a temporary
# /usr/sbin/policy-rc.d (exit 101) when the machine has none.
set -euo pipefail

readonly prog=setup.sh
readonly k_policy=/usr/sbin/policy-rc.d

# The tfslurm binary alone (scripts/demo.sh): the compiler, CMake and the libraries it links.
readonly -a k_demo_packages=(
    cmake g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libboost-dev
    libsodium-dev libmunge-dev
)
# Build, lint and unit tests. libclang-rt-dev: the sanitizer and libFuzzer runtimes of the
# release's default clang (the fuzz and asan presets).
readonly -a k_build_packages=(
    build-essential cmake g++ clang libclang-rt-dev clang-format clang-tidy
    # The dev build's compiler cache (scripts/build.sh).
    ccache
    libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libboost-dev catch2 libsodium-dev
    shellcheck python3 ca-certificates psmisc
    # What the CLI tests run: script (a terminal for NO_COLOR), groff (the man page renders).
    bsdutils groff-base
    # The Debian package (cpack -G DEB) and its test: dpkg-shlibdeps, file, lintian, man.
    dpkg-dev file lintian man-db
    # The RPMs for EL sites and their test (tests/package/check_rpm.sh): rpmbuild, rpmlint.
    # mmdebstrap: the build roots of other Slurm releases (scripts/test-cluster build).
    rpm rpmlint cpio mmdebstrap
)
# The test cluster (scripts/test-cluster) and its smoke test (gcc builds a SPANK plugin and a
# PMI2 program; python3 runs the cross-node TCP check), and the end-to-end tests that run the
# PyTorch examples on it (python3-torch: ~150 MB download, ~600 MB installed, about 30 s;
# only Debian's /usr/bin/python3 sees it); its accounting (slurmdbd, and MariaDB's server and
# client without their service: the cluster starts a private one), for sacct. Prometheus and
# promtool: the metrics endpoint's test scrapes a step with a real Prometheus (started and
# stopped by the test, never as a service) and checks the text with promtool. tmux: the live
# view of `tfslurm top` driven in a real terminal (e2e_run_top).
readonly -a k_cluster_packages=(
    munge libmunge-dev slurm-client slurmctld slurmd slurmdbd slurm-wlm-basic-plugins
    libslurm-dev libpmi2-0-dev iproute2 util-linux procps coreutils gcc libc6-dev python3
    python3-torch mariadb-server-core mariadb-client-core prometheus curl tmux
)

# log, die, usage_or_die.
# shellcheck source-path=SCRIPTDIR source=lib/messages.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/messages.sh"
# shellcheck source-path=SCRIPTDIR source=lib/packages.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/packages.sh"

usage() {
    cat <<'EOF'
usage: scripts/setup.sh [--demo | --cluster-only] [--check | --list] [--help]

Installs (apt-get, --no-install-recommends) the Debian packages needed to build tfslurm and
run its tests, including the test cluster of the machine's Slurm. Debian 12, 13 and sid.
Needs root. Daemons are not started.

  --demo           only the packages that building the tfslurm binary needs (scripts/demo.sh)
  --cluster-only   only the packages scripts/test-cluster needs
  --check          print the missing packages and exit 1 if there are any; install nothing
  --list           print the packages wanted, one a line, installed or not; install nothing
  --help           this text
EOF
}

# have_candidates PACKAGE...: true when apt knows an installable version of each package.
have_candidates() {
    local pkg candidate
    for pkg in "$@"; do
        candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ { print $2 }')
        [[ -n $candidate && $candidate != "(none)" ]] || return 1
    done
}

main() {
    local cluster_only=0 demo_only=0 check_only=0 list_only=0 arg
    for arg in "$@"; do
        case $arg in
        --cluster-only) cluster_only=1 ;;
        --demo) demo_only=1 ;;
        --check) check_only=1 ;;
        --list) list_only=1 ;;
        *) usage_or_die "$arg" ;;
        esac
    done

    ((cluster_only && demo_only)) && die "--demo and --cluster-only exclude each other"
    ((check_only && list_only)) && die "--check and --list exclude each other"
    local -a wanted
    if ((demo_only)); then
        wanted=("${k_demo_packages[@]}")
    else
        wanted=("${k_cluster_packages[@]}")
        ((cluster_only)) || wanted+=("${k_demo_packages[@]}" "${k_build_packages[@]}")
    fi
    # Remove duplicates, keep order.
    local -A seen=()
    local -a unique=() missing=()
    local pkg
    for pkg in "${wanted[@]}"; do
        [[ -n ${seen[$pkg]:-} ]] && continue
        seen[$pkg]=1
        unique+=("$pkg")
    done
    if ((list_only)); then
        printf '%s\n' "${unique[@]}"
        return 0
    fi

    command -v dpkg-query >/dev/null || die "dpkg-query not found: this script supports Debian only"
    for pkg in "${unique[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done

    if ((${#missing[@]} == 0)); then
        log "all ${#seen[@]} packages already installed"
        return 0
    fi
    if ((check_only)); then
        printf '%s\n' "${missing[@]}"
        log "${#missing[@]} package(s) missing; run scripts/setup.sh as root to install them"
        return 1
    fi

    (($(id -u) == 0)) || die "installing ${missing[*]} needs root: run 'sudo scripts/setup.sh'"

    export DEBIAN_FRONTEND=noninteractive
    # Block daemon starts by the maintainer scripts (invoke-rc.d / deb-systemd-invoke honour
    # policy-rc.d). Only a policy file that we created is removed again.
    if [[ ! -e $k_policy ]]; then
        trap 'rm -f -- "$k_policy"' EXIT
        trap 'exit 130' INT TERM
        printf '#!/bin/sh\n# temporary, created by tfslurm scripts/setup.sh\nexit 101\n' >"$k_policy"
        chmod 755 "$k_policy"
    fi

    local -a apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

    log "installing ${#missing[@]} package(s): ${missing[*]}"
    # Skip 'apt-get update' when the package lists already know every package; if the install
    # then fails (stale lists), update and try once more.
    if ! have_candidates "${missing[@]}"; then
        log "apt-get update"
        apt-get update -q </dev/null
    elif apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null; then
        log "installed: ${missing[*]}"
        return 0
    else
        log "install failed with the current package lists; running apt-get update and retrying"
        apt-get update -q </dev/null
    fi
    apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null ||
        die "apt-get install failed for: ${missing[*]} (see the apt output above)"
    log "installed: ${missing[*]}"
}

main "$@"
