#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's demo: install the dependencies, build, and run a small parameter-server job on
# this machine with `tfslurm run --local` (the same launcher code path as under srun):
#
#   1. 1 ps + 3 workers: the workers train and exit 0, then tfslurm stops the ps (which, like
#      tf.distribute.Server.join(), would otherwise run forever) and the job exits 0;
#   2. the same job where worker rank 2 crashes: every task is stopped at once, each launcher
#      prints the same one-line reason, and the job exits with the crashed worker's status.
#
# It installs and builds only what the demo needs (scripts/setup.sh --demo, the `demo` CMake
# preset: the tfslurm binary, no tests); scripts/test.sh installs and builds the rest.
#
#   scripts/demo.sh [--no-build]      (--no-build: use build/demo as it is)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=1
if [ "${1:-}" = "--no-build" ]; then
    build=0
fi

if [ "$build" -eq 1 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "demo.sh: installing packages needs root; re-running with sudo" >&2
        exec sudo "$0" "$@"
    fi
    scripts/setup.sh --demo
    cmake --preset demo >/dev/null
    cmake --build --preset demo
fi

tfslurm=build/demo/cli/tfslurm
if [ ! -x "$tfslurm" ]; then
    echo "demo.sh: error: $tfslurm is missing: run scripts/demo.sh without --no-build" >&2
    exit 1
fi

banner() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
    printf '$ %s\n' "$*"
    "$@"
}

banner "The plan of a 4-task job on this machine (what --local uses)"
show "$tfslurm" plan --nodelist localhost --tasks-per-node 4 --ps 1 --address ip --job-id 4242

banner "1 ps + 3 workers: the ps is stopped when the workers are done"
status=0
show "$tfslurm" run --local 4 --job-id 4242 --ps 1 --grace 5 -- examples/trainer.sh || status=$?
echo "exit status: $status"

banner "The same job, but worker rank 2 crashes: everything stops at once"
status=0
DEMO_FAIL_RANK=2 show "$tfslurm" run --local 4 --job-id 4243 --ps 1 --grace 5 -- examples/trainer.sh \
    || status=$?
echo "exit status: $status (the crashed worker's)"

cat <<'TEXT'

In a Slurm job script the same launcher runs once per task:

    srun --resv-ports=3 tfslurm run --ps 2 -- python train.py

(see examples/job.sbatch and docs/protocol.md).
TEXT
