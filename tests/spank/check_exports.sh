#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_exports.sh NM PLUGIN EXPECTED: the dynamic symbols PLUGIN defines (nm -D --defined-only)
# must be exactly the names in EXPECTED (one per line, '#' comments allowed). Prints a diff and
# fails otherwise.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    printf 'usage: %s NM PLUGIN EXPECTED\n' "${0##*/}" >&2
    exit 2
fi
nm=$1 plugin=$2 expected=$3

actual=$("$nm" -D --defined-only --format=posix -- "$plugin" | awk '{ print $1 }' | LC_ALL=C sort)
wanted=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' -- "$expected" | LC_ALL=C sort)

if [[ $actual != "$wanted" ]]; then
    printf 'exported symbols of %s differ from %s (< expected, > actual):\n' "$plugin" "$expected" >&2
    diff <(printf '%s\n' "$wanted") <(printf '%s\n' "$actual") >&2 || true
    exit 1
fi
printf '%s exports exactly:\n%s\n' "${plugin##*/}" "$actual"
