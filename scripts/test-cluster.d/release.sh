# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: which Slurm release the cluster runs. The machine's own release
# (22.05 on Debian 12) runs from the machine's packages, as it always did. Another release runs
# from a root filesystem of the Debian suite that packages it (24.11: trixie, 26.05: sid), built
# once with mmdebstrap from the machine's own apt mirror and cached in /var/cache/tfslurm-tc.
# Every program of that release (munged, slurmctld, slurmd, slurmstepd, srun, ..., libslurm)
# runs chrooted into it, in a private mount namespace where the host's /proc, /sys, /dev, /tmp,
# the cluster's state directory and the repository checkout are bound at the same paths: a
# tfslurm built on the host runs against that release as a site's would.

# Releases this script knows, and the Debian suite that packages each.
readonly -a k_releases=(22.05 24.11 26.05)
declare -Ar k_release_suite=([22.05]=bookworm [24.11]=trixie [26.05]=sid)
# Slurm's clients, as wrappers in <state dir>/bin (the host's own would talk to the wrong
# release): outside the root filesystem each one re-enters it through 'test-cluster exec'.
readonly -a k_client_commands=(srun sbatch salloc sattach sbcast scancel scontrol sinfo squeue
    sacct sstat sprio sshare sdiag strigger)
# A file at the top of every root filesystem we built; it also tells a wrapper that it already
# runs inside one.
readonly k_rootfs_stamp=.tfslurm-tc-rootfs
# What the root filesystem holds (k_cluster_rootfs_packages, and k_cluster_rootfs_extras
# installed afterwards, stamped in a file of its own) is in scripts/lib/rootfs.sh, with the
# mmdebstrap build and the mirror lookup that scripts/build-in-release.sh uses too.
readonly k_rootfs_extras_stamp=.tfslurm-tc-extras

# host_release: the Slurm release of this machine's Debian suite (what runs without a root
# filesystem), e.g. 22.05 on bookworm; empty on a suite this script does not know.
host_release() {
    local codename='' rel
    [[ -r /etc/os-release ]] && codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
    for rel in "${k_releases[@]}"; do
        [[ ${k_release_suite[$rel]} == "$codename" ]] && printf '%s' "$rel" && return 0
    done
    return 0
}

# validate_release: TC_SLURM is a known release; sets TC_ROOTFS (empty for the machine's own).
validate_release() {
    local rel known=0
    for rel in "${k_releases[@]}"; do
        [[ $rel == "$TC_SLURM" ]] && known=1
    done
    ((known)) || die "$TC_SLURM_FROM: expected one of ${k_releases[*]}: \"$TC_SLURM\""
    local cache=${TFSLURM_TC_CACHE:-/var/cache/tfslurm-tc}
    [[ $cache =~ ^/[A-Za-z0-9._/-]+$ && $cache != *..* ]] ||
        die "TFSLURM_TC_CACHE: expected an absolute path of [A-Za-z0-9._/-]: \"$cache\""
    if [[ $TC_SLURM == "$(host_release)" ]]; then
        TC_ROOTFS=
    else
        TC_ROOTFS=${cache%/}/rootfs-$TC_SLURM
    fi
}

# release_init: after the settings are loaded, how this script reaches the release's programs:
# TC_ENTER is the command prefix that runs a program of the release (empty for the machine's
# own release), and PATH leads to the client wrappers, once 'up' wrote them.
release_init() {
    TC_ENTER=()
    [[ -n ${TC_ROOTFS:-} ]] || return 0
    TC_ENTER=("$script_dir/test-cluster.d/enter" "$TC_ROOTFS" "${k_rootfs_binds[@]}" "$TC_DIR")
    [[ -n ${TFSLURM_TC_BINDS:-} ]] && TC_ENTER+=(${TFSLURM_TC_BINDS//:/ })
    TC_ENTER+=(--)
    [[ -d $TC_DIR/bin && :$PATH: != *":$TC_DIR/bin:"* ]] && PATH=$TC_DIR/bin:$PATH
    return 0
}

# The host paths every program of another release sees at the same path: the kernel's file
# systems, /tmp, the users, the repository checkout (TFSLURM_TC_BINDS adds more, ':'-separated).
repo_root=$(cd -- "$script_dir/.." && pwd -P)
readonly repo_root
readonly -a k_rootfs_binds=(/proc /sys /dev /tmp /etc/passwd /etc/group /etc/hosts "$repo_root")

# rootfs_release ROOT: the Slurm release (major.minor) installed in ROOT.
rootfs_release() {
    local version
    version=$(dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${Version}' slurmd 2>/dev/null) || return 1
    [[ $version =~ ^([0-9]+\.[0-9]+)\. ]] || return 1
    printf '%s' "${BASH_REMATCH[1]}"
}

# ensure_rootfs: build TC_ROOTFS once (a few minutes; under a lock of its own, so that two
# clusters never build the same one), then check that it holds the requested release, then
# install the extra packages it lacks.
ensure_rootfs() {
    [[ -n $TC_ROOTFS ]] || return 0
    ensure_rootfs_base
    ensure_rootfs_extras
}

# ensure_rootfs_extras: install k_cluster_rootfs_extras into TC_ROOTFS once, under the root
# filesystem's lock.
ensure_rootfs_extras() {
    local root=$TC_ROOTFS want fd log=$TC_ROOTFS.extras.log t0
    want="extras=${k_cluster_rootfs_extras[*]}"
    rootfs_stamped "$root" "$k_rootfs_extras_stamp" "$want" && return 0
    exec {fd}>"$root.lock"
    flock -w 1800 "$fd" || die "another build of $root has held $root.lock for 30 minutes"
    if rootfs_stamped "$root" "$k_rootfs_extras_stamp" "$want"; then
        exec {fd}>&-
        return 0
    fi
    t0=$(now_us)
    log "installing ${k_cluster_rootfs_extras[*]} into $root (once; log: $log)"
    if ! rootfs_apt_install "$root" "$log" "${k_cluster_rootfs_extras[@]}"; then
        exec {fd}>&-
        die_log "$log" "could not install ${k_cluster_rootfs_extras[*]} into $root"
    fi
    printf '%s\n' "$want" >"$root/$k_rootfs_extras_stamp"
    exec {fd}>&-
    log "${k_cluster_rootfs_extras[*]} installed in $(elapsed "$t0") s ($(du -sh -- "$root" | cut -f1))"
}

# ensure_rootfs_base: the root filesystem itself, built by mmdebstrap, of the Debian suite that
# packages TC_SLURM (checked: rootfs_has_release).
ensure_rootfs_base() {
    rootfs_ensure "$TC_ROOTFS" "$k_rootfs_stamp" "release=$TC_SLURM" "${k_release_suite[$TC_SLURM]}" \
        rootfs_has_release "${k_cluster_rootfs_packages[@]}"
}

# rootfs_has_release ROOT: true if ROOT holds Slurm TC_SLURM; else prints what it holds.
rootfs_has_release() {
    local got
    got=$(rootfs_release "$1") || got=none
    [[ $got == "$TC_SLURM" ]] && return 0
    printf 'Debian %s now packages Slurm %s, not %s; this script needs to learn that release' \
        "${k_release_suite[$TC_SLURM]}" "$got" "$TC_SLURM"
    return 1
}

# write_client_wrappers: <state dir>/bin/<client> for each of Slurm's clients: outside the root
# filesystem it enters it (as 'test-cluster exec -- <client>' does, without bash's start-up);
# inside (a task, a batch script, 'exec') it is the release's own /usr/bin/<client>.
write_client_wrappers() {
    [[ -n $TC_ROOTFS ]] || return 0
    mkdir -p -- "$TC_DIR/bin"
    local cmd enter
    enter=$(printf '%q ' "${TC_ENTER[@]}")
    for cmd in "${k_client_commands[@]}"; do
        cat >"$TC_DIR/bin/$cmd" <<EOF
#!/bin/sh
# $cmd of Slurm $TC_SLURM for the test cluster in $TC_DIR (written by scripts/test-cluster up)
if [ -e /$k_rootfs_stamp ]; then exec /usr/bin/$cmd "\$@"; fi
SLURM_CONF=\${SLURM_CONF:-$(conf_path)}
export SLURM_CONF
exec $enter$cmd "\$@"
EOF
        chmod 755 -- "$TC_DIR/bin/$cmd"
    done
}

# cmd_rootfs [--slurm RELEASE]: build (once) and check the root filesystem of a release without
# starting a cluster, e.g. ahead of 'up' (which would build it too).
cmd_rootfs() {
    parse_slurm_option rootfs "$@"
    need_root
    load_requested
    validate_dir
    validate_release
    if [[ -z $TC_ROOTFS ]]; then
        log "Slurm $TC_SLURM is this machine's own release: no root filesystem needed"
        return 0
    fi
    ensure_rootfs
    log "Slurm $TC_SLURM: $TC_ROOTFS ($(rootfs_release "$TC_ROOTFS"), $(du -sh -- "$TC_ROOTFS" | cut -f1))"
}

# parse_slurm_option COMMAND ARGS...: --slurm RELEASE or --slurm=RELEASE, the only option of
# 'up' and 'rootfs' (exported as TFSLURM_TC_SLURM, which the settings read).
parse_slurm_option() {
    local cmd=$1
    shift
    while (($# > 0)); do
        case $1 in
        --slurm=*) export TFSLURM_TC_SLURM=${1#--slurm=} ;;
        --slurm)
            (($# >= 2)) || die "--slurm: expected a release (${k_releases[*]})"
            export TFSLURM_TC_SLURM=$2
            shift
            ;;
        *) die "$cmd: unknown argument \"$1\"; expected --slurm RELEASE (${k_releases[*]})" ;;
        esac
        TC_SLURM_FROM=--slurm
        shift
    done
}

# cmd_exec -- CMD ARGS...: run CMD where the cluster's release is, with SLURM_CONF set.
cmd_exec() {
    [[ ${1:-} == -- ]] && shift
    (($# >= 1)) || die "usage: $prog exec -- CMD [ARGS...]"
    require_recorded
    release_init
    export SLURM_CONF=${SLURM_CONF:-$(conf_path)}
    if ((${#TC_ENTER[@]} == 0)); then
        exec "$@"
    fi
    need_root
    exec "${TC_ENTER[@]}" "$@"
}
