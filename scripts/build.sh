#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install every dependency (Debian 12, apt) and build tfslurm with the dev preset
# (warnings as errors). Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "build.sh: installing packages needs root; re-running with sudo" >&2
    exec sudo --preserve-env=TFSLURM_FUZZ_SECONDS,CI "$0" "$@"
fi

scripts/setup.sh
# The compiler cache, shared by every clone on this machine (setup.sh installs ccache): paths
# below the checkout are hashed relative to it (CCACHE_BASEDIR; __FILE__ too, CMakeLists.txt),
# the working directory not at all. A fresh clone's build then takes a minute instead of seven
# on 2 cores. Kept with the test command's other caches, in /var/cache/tfslurm-*.
launcher=()
if command -v ccache >/dev/null; then
    launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_DIR=/var/cache/tfslurm-ccache-dev;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache")
fi
cmake --preset dev "${launcher[@]}"
cmake --build --preset dev
