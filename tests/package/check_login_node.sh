#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_login_node.sh DEB: the tfslurm package alone on a login node. A minimal Debian root
# filesystem of this machine's release (mmdebstrap's minbase: no Slurm, no slurmd, no munge;
# built once and cached in $TFSLURM_TC_CACHE, default /var/cache/tfslurm-tc) gets DEB installed
# with dpkg -i, which must succeed without slurmd; then the installed tfslurm previews a plan
# and prints an event file's timeline there, exactly as on a node of the cluster. Needs root
# (a private mount namespace and chroot; scripts/test-cluster.d/enter) and, the first time,
# Debian's archive.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$here/check_lib.sh"

check_args 1 'DEB' "$@"
deb=$(realpath -- "$1")
[[ -f $deb ]] || {
    printf 'check_login_node.sh: no package "%s" (run ctest so that package_build makes it)\n' "$1" >&2
    exit 1
}
(($(id -u) == 0)) || {
    echo "check_login_node.sh: skipped: needs root (chroot into a root filesystem)" >&2
    exit 77
}
enter=$here/../../scripts/test-cluster.d/enter

# The login node's root filesystem: this machine's Debian release, minbase, cached as a tarball.
suite=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:?}")
cache=${TFSLURM_TC_CACHE:-/var/cache/tfslurm-tc}
tarball=$cache/rootfs-login-$suite.tar
mkdir -p -- "$cache"
exec {lock}>"$tarball.lock"
flock -w 600 "$lock" || { echo "check_login_node.sh: $tarball.lock is held" >&2; exit 1; }
if [[ ! -s $tarball ]]; then
    echo "building a minimal Debian $suite root filesystem (once): $tarball"
    timeout 600 mmdebstrap --quiet --format=tar --variant=minbase "$suite" "$tarball.tmp" \
        "deb http://deb.debian.org/debian $suite main" >"$tarball.log" 2>&1 || {
        tail -20 -- "$tarball.log" >&2
        rm -f -- "$tarball.tmp"
        echo "check_login_node.sh: mmdebstrap failed (log: $tarball.log)" >&2
        exit 1
    }
    mv -- "$tarball.tmp" "$tarball"
fi
exec {lock}>&-

root=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-login-node.XXXXXX")
trap 'rm -rf -- "$root"' EXIT
tar -C "$root" -xf "$tarball"
cp -- "$deb" "$root/tmp/"
# in_root CMD...: CMD inside the login node's root filesystem, bounded, stdout and stderr kept.
in_root() { timeout 120 "$enter" "$root" /proc /dev -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# --- no Slurm on the node ----------------------------------------------------------------------
# shellcheck disable=SC2016 # dpkg-query format fields, not shell expansions
installed=$(in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null |
    awk '$1 == "ii" && $2 ~ /slurm|munge/ { print $2 }')
if [[ -z $installed && ! -e $root/usr/sbin/slurmd && ! -e $root/usr/bin/srun ]]; then
    ok "no Slurm and no munge on the login node"
else
    fail "the login node's root filesystem has Slurm or munge: ${installed:-(files only)}"
fi

# --- dpkg -i of the command alone --------------------------------------------------------------
if out=$(in_root dpkg -i "/tmp/${deb##*/}" 2>&1); then
    ok "dpkg -i ${deb##*/} without slurmd"
else
    fail "dpkg -i ${deb##*/} failed:"$'\n'"$out"
fi
# shellcheck disable=SC2016 # a dpkg-query format field
status=$(in_root dpkg-query -W -f='${db:Status-Abbrev}' tfslurm 2>&1 || true)
[[ $status == ii* ]] || fail "tfslurm is not installed after dpkg -i: \"$status\""

# --- tfslurm plan --------------------------------------------------------------------------------
expected='# job 7, step -: 2 tasks on 2 nodes (n[1-2]), native layout
# ports: derived; launcher control endpoint n1:22443
RANK  ROLE      HOST  ADDRESS  PORT   GPUS
0     ps:0      n1    n1       22442  -
1     worker:0  n2    n2       22442  -'
got=$(in_root tfslurm plan --nodelist 'n[1-2]' --tasks-per-node 1 --ps 1 --job-id 7 2>&1) ||
    fail "tfslurm plan exited with status $?"
if [[ $got == "$expected" ]]; then ok "tfslurm plan on the login node"; else
    fail "tfslurm plan printed:"$'\n'"$got"
fi

# --- tfslurm events ------------------------------------------------------------------------------
cat >"$root/tmp/run.events" <<'EVENTS'
{"v":1,"time":"2026-11-26T13:02:31.004Z","event":"step","job":"94","step":"0","ranks":2,"nodes":"n[1-2]"}
{"v":1,"time":"2026-11-26T13:02:31.016Z","event":"registered","rank":0,"role":"ps","index":0,"host":"n1"}
{"v":1,"time":"2026-11-26T13:02:31.020Z","event":"registered","rank":1,"role":"worker","index":0,"host":"n2"}
{"v":1,"time":"2026-11-26T13:02:32.904Z","event":"exited","rank":1,"role":"worker","index":0,"host":"n2","status":1}
{"v":1,"time":"2026-11-26T13:02:32.905Z","event":"verdict","verdict":"aborted","status":1,"why":"rank 1 (worker:0) on n2 exited with status 1"}
EVENTS
expected='from 2026-11-26 13:02:31.004 UTC
    +0.000 s  step 94.0: 2 ranks on n[1-2]
    +0.012 s  rank 0 (ps:0) on n1: registered
    +0.016 s  rank 1 (worker:0) on n2: registered
    +1.900 s  rank 1 (worker:0) on n2: trainer exited with status 1
    +1.901 s  verdict: aborted, status 1: rank 1 (worker:0) on n2 exited with status 1'
got=$(in_root tfslurm events /tmp/run.events 2>&1) || fail "tfslurm events exited with status $?"
if [[ $got == "$expected" ]]; then ok "tfslurm events on the login node"; else
    fail "tfslurm events printed:"$'\n'"$got"
fi

check_summary "${deb##*/} on a login node"
