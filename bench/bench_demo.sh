#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_demo: the README's first command as a new user meets it. A fresh Debian 12 root
# filesystem (mmdebstrap: minbase with git, nothing else, no compiler cache), a fresh clone of
# COMMIT, then `scripts/demo.sh` as root inside it, timed: the whole command, then each stage
# (apt, the build, the demo itself) from the times its output lines arrived. A benchmark that
# prints figures, not a test: nothing here asserts a time.
#
#   bench/bench_demo.sh [COMMIT]        (as root; default HEAD; the root filesystem is cached in
#                                        /var/cache/tfslurm-bench/bookworm-minbase.tar)
#
# The clone comes from this checkout (committed work only). The root filesystem gets the
# host's /etc/resolv.conf and an /etc/hosts that names localhost, as every real machine has.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)
commit=$(git rev-parse --verify "${1:-HEAD}^{commit}")

[[ $(id -u) -eq 0 ]] || { echo "bench_demo: needs root (a root filesystem and apt inside it)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "bench_demo: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }

cache=/var/cache/tfslurm-bench
tarball=$cache/bookworm-minbase.tar
mkdir -p -- "$cache"
if [[ ! -s $tarball ]]; then
    echo "bench_demo: building a minimal Debian 12 root filesystem (once, about 30 s)" >&2
    mmdebstrap --quiet --format=tar --variant=minbase --include=git,ca-certificates bookworm "$tarball.tmp" \
        "deb http://deb.debian.org/debian bookworm main" \
        "deb http://deb.debian.org/debian bookworm-updates main" \
        "deb http://deb.debian.org/debian-security bookworm-security main"
    mv -- "$tarball.tmp" "$tarball"
fi

root=$(mktemp -d /tmp/tfslurm-bench-demo.XXXXXX)
trap 'rm -rf -- "$root"' EXIT
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# Each output line of demo.sh is stamped with the milliseconds since it started.
cat >"$root/root/run-demo.sh" <<EOF
#!/bin/bash
set -o pipefail
git clone -q "$repo" /root/tfslurm && git -C /root/tfslurm checkout -q "$commit" || exit 2
cd /root/tfslurm
start=\$(date +%s%N)
scripts/demo.sh 2>&1 | while IFS= read -r line; do
    printf '%s %s\n' "\$(( (\$(date +%s%N) - start) / 1000000 ))" "\$line"
done >/root/demo.out
EOF
chmod +x "$root/root/run-demo.sh"

load=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
scripts/test-cluster.d/enter "$root" /proc /sys /dev "$repo" -- /root/run-demo.sh || status=$?
out=$root/root/demo.out
[[ $status -eq 0 ]] || { tail -20 "$out" >&2; echo "bench_demo: scripts/demo.sh failed (status $status)" >&2; exit 1; }

at() { awk -v pattern="$1" 'index($0, pattern) { print $1; exit }' "$out"; }
apt_end=$(at 'setup.sh: installed')
build_end=$(at '== The plan of')
total=$(tail -1 "$out" | cut -d' ' -f1)
seconds() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }
echo "bench_demo: $(git log -1 --format='%h %s' "$commit" | cut -c1-70)"
echo "  machine: $(nproc) cores, load average $load at the start, $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '  %-44s %10s\n' "scripts/demo.sh, fresh root, fresh clone" "$(seconds "$total")"
printf '  %-44s %10s\n' "  apt (setup.sh --demo: update, install)" "$(seconds "$apt_end")"
printf '  %-44s %10s\n' "  configure and build (no compiler cache)" "$(seconds $((build_end - apt_end)))"
printf '  %-44s %10s\n' "  the demo itself" "$(seconds $((total - build_end)))"
printf '  %-44s %10s\n' "yardstick: the README's promise" "120.0 s"
