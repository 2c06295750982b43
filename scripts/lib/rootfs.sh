# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Root filesystems of other Debian suites, built once with mmdebstrap from this machine's apt
# mirror (the machine's own apt sources are never changed), for the two scripts that run
# another release: scripts/build-in-release.sh (a suite's toolchain, in
# /var/cache/tfslurm-build/<suite>) and scripts/test-cluster (a Slurm release, in
# /var/cache/tfslurm-tc/rootfs-<release>). Sourced; the caller defines log MESSAGE and
# die MESSAGE (which exits).

# What each root filesystem holds. The lists stay two: each root filesystem's stamp names its
# list, so one merged list would rebuild every cached root filesystem (3 to 10 minutes each)
# and put a compiler toolchain into the clusters' and Slurm's daemons into the builds'.
# - A build's (build-in-release.sh): building the library, the CLI, the SPANK plugin and the
#   tests (scripts/setup.sh's build packages less the linters and the clang tools), what the
#   tests run (scontrol, python3, readelf, ps, ip), ccache, and dpkg-dev for the .deb
#   (dpkg-shlibdeps).
# shellcheck disable=SC2034 # used by the scripts that source this file
readonly -a k_build_rootfs_packages=(g++ cmake make libcli11-dev nlohmann-json3-dev libspdlog-dev
    libfmt-dev libboost-dev catch2 libsodium-dev libmunge-dev libpmi2-0-dev python3 slurm-client
    libslurm-dev ccache procps psmisc iproute2 util-linux bsdutils groff-base file binutils
    dpkg-dev)
# - A Slurm release's (test-cluster): the daemons, the clients, libslurm and its headers (the
#   SPANK plugin and the smoke programs are built there), munge, PMI2, and what the tests'
#   tasks run (python3, ip, ss, ps, runuser).
# shellcheck disable=SC2034
readonly -a k_cluster_rootfs_packages=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins
    libslurm-dev libpmi2-0-dev munge procps iproute2 util-linux python3 gcc libc6-dev mawk)
# - Installed into a Slurm release's root filesystem afterwards (stamped in a file of its own,
#   so that adding one never rebuilds the root filesystem): PyTorch, for the tests that run the
#   PyTorch examples (tests/e2e/test_torch_*.sh; about 220 MB to download, once), and the
#   release's slurmdbd (accounting; its database is this machine's MariaDB).
# shellcheck disable=SC2034
readonly -a k_cluster_rootfs_extras=(python3-torch slurmdbd)

# scripts/test-cluster.d/enter: runs a command chrooted into a root filesystem.
k_rootfs_enter=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)/test-cluster.d/enter
readonly k_rootfs_enter

# apt_mirror: the Debian mirror this machine's apt uses (TFSLURM_TC_MIRROR overrides it).
apt_mirror() {
    if [[ -n ${TFSLURM_TC_MIRROR:-} ]]; then
        printf '%s' "$TFSLURM_TC_MIRROR"
        return 0
    fi
    local file line
    for file in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $file ]] || continue
        while IFS= read -r line; do
            # deb822 "URIs: http://.../debian" or one-line "deb [opts] http://.../debian suite main"
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

# rootfs_fail LOG MESSAGE: die, showing the last lines of LOG.
rootfs_fail() {
    local log=$1
    shift
    [[ -s $log ]] && tail -n 20 -- "$log" >&2
    die "$* (log: $log)"
}

# rootfs_stamped ROOT STAMP_FILE WANT: true when ROOT/STAMP_FILE holds WANT.
rootfs_stamped() {
    [[ -f $1/$2 && $(<"$1/$2") == "$3" ]]
}

# rootfs_apt_install ROOT LOG PACKAGE...: install the packages into ROOT with its own apt (the
# suite's sources list that mmdebstrap wrote; the machine's resolv.conf for the mirror's name).
rootfs_apt_install() {
    local root=$1 log=$2
    shift 2
    # shellcheck disable=SC2016 # expanded by the sh inside the root filesystem
    "$k_rootfs_enter" "$root" /proc /sys /dev /etc/resolv.conf -- \
        /usr/bin/env DEBIAN_FRONTEND=noninteractive /bin/sh -c \
        'apt-get update && apt-get install -y --no-install-recommends "$@" && apt-get clean' \
        sh "$@" >"$log" 2>&1
}

# rootfs_ensure ROOT STAMP_FILE KEY SUITE CHECK PACKAGE...: make ROOT a root filesystem of
# Debian SUITE that holds the packages, once, under ROOT.lock (two runs never build the same
# one). ROOT/STAMP_FILE says what it was built with, "KEY packages=PACKAGE..." (KEY:
# suite=trixie, release=24.11): a root filesystem of the same KEY built with an older list
# gets the packages it lacks installed, any other is built again (several minutes). CHECK ROOT
# (a command; true for none) vets a new root filesystem, printing what is wrong. The suite's
# package lists stay in it: they tell which packages the release has.
rootfs_ensure() {
    local root=$1 stamp_file=$2 key=$3 suite=$4 check=$5
    shift 5
    local want="$key packages=$*"
    rootfs_stamped "$root" "$stamp_file" "$want" && return 0
    if ! command -v mmdebstrap >/dev/null; then
        log "a root filesystem of Debian $suite needs mmdebstrap: installing it"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >&2 ||
            die "cannot install mmdebstrap (see the apt output above); install it with apt-get install mmdebstrap"
    fi
    mkdir -p -- "${root%/*}"
    local fd
    exec {fd}>"$root.lock"
    flock -w 1800 "$fd" || die "another build of $root has held $root.lock for 30 minutes"
    if rootfs_stamped "$root" "$stamp_file" "$want"; then
        exec {fd}>&-
        return 0
    fi
    local t0=$SECONDS
    if [[ -f $root/$stamp_file && $(<"$root/$stamp_file") == "$key "* ]]; then
        log "installing the packages that the root filesystem of Debian $suite ($key) lacks (log: $root.log)"
        rootfs_apt_install "$root" "$root.log" "$@" || {
            exec {fd}>&-
            rootfs_fail "$root.log" "apt-get could not install the packages in $root"
        }
    else
        local mirror opts='' packages problem
        mirror=$(apt_mirror)
        # sid's index may be past its Valid-Until date on a mirror snapshot: that suite only may be.
        [[ $suite == sid ]] && opts='[check-valid-until=no] '
        packages=$(
            IFS=,
            printf '%s' "$*"
        )
        log "building a root filesystem of Debian $suite ($key) in $root (once, several minutes; log: $root.log)"
        rm -rf -- "$root" "$root.tmp"
        if ! mmdebstrap --variant=apt --skip=cleanup/apt/lists --include="$packages" "$suite" \
            "$root.tmp" "deb ${opts}$mirror $suite main" >"$root.log" 2>&1; then
            rm -rf -- "$root.tmp"
            exec {fd}>&-
            rootfs_fail "$root.log" "mmdebstrap could not build the root filesystem of Debian $suite from $mirror"
        fi
        if ! problem=$("$check" "$root.tmp"); then
            rm -rf -- "$root.tmp"
            exec {fd}>&-
            die "$problem"
        fi
        mv -- "$root.tmp" "$root"
    fi
    printf '%s\n' "$want" >"$root/$stamp_file"
    exec {fd}>&-
    log "root filesystem of Debian $suite ($key) ready in $((SECONDS - t0)) s ($(du -sh -- "$root" | cut -f1))"
}
