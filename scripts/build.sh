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
cmake --preset dev
cmake --build --preset dev
