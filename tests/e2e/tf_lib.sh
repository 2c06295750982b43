#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Helpers for the end-to-end tests that run real TensorFlow (tests/e2e/test_tf*.sh). Source it
# after lib.sh:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   source "$(dirname "${BASH_SOURCE[0]}")/tf_lib.sh"
#   use_tensorflow
#
# TensorFlow lives in a virtual environment of Debian's python3 that scripts/setup-tensorflow.sh
# makes (scripts/test.sh runs it); CTest passes its python as E2E_TF_PYTHON. A test run
# without it fails (it does not skip): TensorFlow is what these tests are about.

# use_tensorflow: PATH (exported: srun and sbatch pass it to every task) starts with a directory
# where `tfslurm` is E2E_TFSLURM and `python3` is the TensorFlow venv's python, so the examples'
# job scripts run as a user would run them; EXAMPLES is the examples directory. TensorFlow is
# kept small on the 2-core test machine: one intra-op thread, warnings only. Not one inter-op
# thread: a TF2 ParameterServerStrategy worker then deadlocks (its function waits for a value
# from a ps while the only inter-op thread is the one waiting).
use_tensorflow() {
    require_tfslurm
    # The venv is built for this machine's python; another release's tasks run the python of
    # its root filesystem, which cannot load it. scripts/test.sh runs these tests on 22.05 only.
    [[ -z ${TC_ROOTFS:-} ]] ||
        fail "the TensorFlow tests run on this machine's own Slurm only: the venv of" \
            "scripts/setup-tensorflow.sh is built for this machine's python, and the tasks of" \
            "Slurm $TC_SLURM run the python of its root filesystem"
    : "${E2E_TF_PYTHON:=}"
    [[ -n $E2E_TF_PYTHON && -x $E2E_TF_PYTHON ]] ||
        fail "TensorFlow is not installed: E2E_TF_PYTHON (\"$E2E_TF_PYTHON\") is not an" \
            "executable; run scripts/setup-tensorflow.sh (scripts/test.sh does) and the test" \
            "through ctest"
    "$E2E_TF_PYTHON" -c 'import importlib.util, sys
sys.exit(importlib.util.find_spec("tensorflow") is None)' ||
        fail "$E2E_TF_PYTHON cannot import tensorflow: run scripts/setup-tensorflow.sh"
    EXAMPLES=$E2E_SOURCE_DIR/examples
    local bin
    bin=$(make_tmpdir)
    chmod 755 "$bin"
    ln -s -- "$E2E_TFSLURM" "$bin/tfslurm"
    # A wrapper, not a link: the venv is found from the path its python was started by.
    printf '#!/bin/sh\nexec %q "$@"\n' "$E2E_TF_PYTHON" >"$bin/python3"
    chmod 755 "$bin/python3"
    PATH=$bin:$PATH
    TF_CPP_MIN_LOG_LEVEL=2
    TF_NUM_INTRAOP_THREADS=1
    PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
    unset TFSLURM_MUNGE_SOCKET
    export PATH EXAMPLES TF_CPP_MIN_LOG_LEVEL TF_NUM_INTRAOP_THREADS PYTHONDONTWRITEBYTECODE \
        E2E_TF_PYTHON
}
