# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by check_package.sh and check_rpm.sh: the usage check and the tally of the checks.

# check_args COUNT USAGE ARGS...: exit 2 with "usage: <script> USAGE" unless ARGS are COUNT.
check_args() {
    local count=$1 usage=$2
    shift 2
    if [[ $# -ne $count ]]; then
        printf 'usage: %s %s\n' "${0##*/}" "$usage" >&2
        exit 2
    fi
}

failures=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}
ok() { printf 'ok: %s\n' "$*"; }

# check_summary WHAT: exit 1 with the number of failed checks, or say that every check passed,
# both for WHAT.
check_summary() {
    if ((failures > 0)); then
        printf '%s: %d check(s) failed for %s\n' "${0##*/}" "$failures" "$1" >&2
        exit 1
    fi
    printf '%s: every check passed for %s\n' "${0##*/}" "$1"
}
