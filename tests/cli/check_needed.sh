#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_needed.sh READELF BINARY [--no-libm]: a self-contained tfslurm (TFSLURM_SELF_CONTAINED)
# may need glibc's libraries only (readelf -d NEEDED entries), so that one file copied to any
# glibc system runs there. With --no-libm, libm.so.6 is refused too (the build took fegetround
# and fesetround from libm.a: one library fewer for the loader at every start). Prints the
# entries and fails on any other library.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 || ($# -eq 3 && $3 != --no-libm) ]]; then
    printf 'usage: %s READELF BINARY [--no-libm]\n' "${0##*/}" >&2
    exit 2
fi
readelf=$1 binary=$2 no_libm=${3:-}

needed=$("$readelf" -d -- "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | LC_ALL=C sort)
[[ -n $needed ]] || {
    printf '%s: no NEEDED entries found by %s -d\n' "$binary" "$readelf" >&2
    exit 1
}
others=$(grep -v -x -E 'libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1' \
    <<<"$needed" || true)
if [[ -n $others ]]; then
    printf '%s needs libraries beyond glibc:\n%s\n(all NEEDED entries:\n%s)\n' \
        "${binary##*/}" "$others" "$needed" >&2
    exit 1
fi
if [[ -n $no_libm ]] && grep -q -x 'libm\.so\.6' <<<"$needed"; then
    printf '%s needs libm.so.6, though fegetround and fesetround were to come from libm.a\n' \
        "${binary##*/}" >&2
    exit 1
fi
printf '%s needs only glibc:\n%s\n' "${binary##*/}" "$needed"
