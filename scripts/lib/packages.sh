# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# This machine's Debian packages, for the setup scripts (scripts/setup.sh,
# scripts/setup-tensorflow.sh). Sourced.

# is_installed PACKAGE: true when dpkg reports the package fully installed.
is_installed() {
    local status
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) || return 1
    [[ $status == ii* ]]
}
