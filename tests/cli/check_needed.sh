#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_needed.sh READELF BINARY: a self-contained tfslurm (TFSLURM_SELF_CONTAINED) may need
# glibc's libraries only (readelf -d NEEDED entries), so that one file copied to any glibc
# system runs there. Prints the entries and fails on any other library.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    printf 'usage: %s READELF BINARY\n' "${0##*/}" >&2
    exit 2
fi
readelf=$1 binary=$2

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
printf '%s needs only glibc:\n%s\n' "${binary##*/}" "$needed"
