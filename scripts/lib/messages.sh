# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Messages of the scripts, on stderr, each line prefixed with the script's name (the caller's
# readonly prog), and the fall-through of their argument parsing. Sourced.

# shellcheck disable=SC2154 # prog: the sourcing script's name
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
# shellcheck disable=SC2154
warn() { printf '%s: warning: %s\n' "$prog" "$*" >&2; }
# shellcheck disable=SC2154
die() {
    printf '%s: error: %s\n' "$prog" "$*" >&2
    exit 1
}

# usage_or_die ARG: an argument that no option of the script took. -h, --help and help print
# the usage (the caller's usage function) and exit 0; anything else prints it on stderr and
# fails.
usage_or_die() {
    case $1 in
    -h | --help | help)
        usage
        exit 0
        ;;
    esac
    usage >&2
    die "unknown argument: \"$1\""
}
