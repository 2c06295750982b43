#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Install the pinned TensorFlow (CPU build, from PyPI) into a virtual environment of Debian's
# /usr/bin/python3, for the end-to-end tests that run real TensorFlow on the test cluster.
#
#   scripts/setup-tensorflow.sh            install if needed; print the venv's python on stdout
#   scripts/setup-tensorflow.sh --check    print it and exit 0 if installed, else exit 1
#
# Idempotent: a complete environment (marked by a stamp written after TensorFlow imported) is
# reused at once. The environment and the downloaded wheels live outside the repository, by
# default under /var/cache/tfslurm, so a fresh clone on the same machine does not download
# again, and a venv that was removed is rebuilt from the wheels without the network; the test
# cluster's nodes see the host's file system, so the venv works in every task.
# Fresh machine: about 330 MB downloaded, 1.6 GB installed, about 1.5 minutes (85 s; 230 s on a
# busy machine); from the kept wheels 42 s; complete: under 1 s.
#
# Environment: TFSLURM_TF_VENV (the venv, default /var/cache/tfslurm/venv-tf-<version>),
# TFSLURM_TF_WHEELS (the wheels, default /var/cache/tfslurm/wheels-tf-<version>).
set -euo pipefail

readonly prog=setup-tensorflow.sh
readonly k_tf_version=2.21.0
readonly k_python=/usr/bin/python3
# Debian packages this script needs: the interpreter and its venv module (ensurepip).
readonly -a k_packages=(python3 python3-venv)
readonly k_venv=${TFSLURM_TF_VENV:-/var/cache/tfslurm/venv-tf-${k_tf_version}}
readonly k_wheels=${TFSLURM_TF_WHEELS:-/var/cache/tfslurm/wheels-tf-${k_tf_version}}
readonly k_stamp=$k_venv/.tfslurm-tensorflow-$k_tf_version

# log, die, usage_or_die.
# shellcheck source-path=SCRIPTDIR source=lib/messages.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/messages.sh"
# shellcheck source-path=SCRIPTDIR source=lib/packages.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/packages.sh"

usage() {
    cat <<EOF
usage: scripts/setup-tensorflow.sh [--check] [--help]

Installs tensorflow-cpu==$k_tf_version from PyPI into $k_venv
(a venv of $k_python; wheels kept in $k_wheels) and prints the venv's python.

  --check   print the venv's python and exit 0 if it is installed; exit 1 if not
  --help    this text
EOF
}

# install_packages: the Debian packages in k_packages, under the machine's apt lock.
install_packages() {
    local -a missing=()
    local pkg
    for pkg in "${k_packages[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    ((${#missing[@]} == 0)) && return 0
    (($(id -u) == 0)) || die "installing ${missing[*]} needs root: run it with sudo"
    log "installing Debian package(s): ${missing[*]}"
    local -a apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
    export DEBIAN_FRONTEND=noninteractive
    flock /tmp/tfslurm-apt.lock apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null ||
        {
            flock /tmp/tfslurm-apt.lock apt-get update -q </dev/null &&
                flock /tmp/tfslurm-apt.lock apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null
        } || die "apt-get install failed for: ${missing[*]}"
}

# build_venv: (re)create the venv and install the pinned TensorFlow into it.
build_venv() {
    rm -rf -- "$k_venv"
    mkdir -p -- "$(dirname -- "$k_venv")" "$k_wheels"
    log "creating $k_venv"
    "$k_python" -m venv "$k_venv" || die "'$k_python -m venv $k_venv' failed"
    local -a pip=("$k_venv/bin/python" -m pip --no-input --disable-pip-version-check)
    local -a install=("${pip[@]}" install --no-index --find-links "$k_wheels"
        "tensorflow-cpu==$k_tf_version")
    # The wheels of an earlier run are enough: no download then.
    if ! "${install[@]}" </dev/null >/dev/null 2>&1; then
        log "downloading the wheels of tensorflow-cpu==$k_tf_version into $k_wheels"
        "${pip[@]}" download --progress-bar off --only-binary=:all: --dest "$k_wheels" \
            "tensorflow-cpu==$k_tf_version" </dev/null >&2 ||
            die "pip could not download tensorflow-cpu==$k_tf_version (see pip's output above)"
        log "installing tensorflow-cpu==$k_tf_version from $k_wheels"
        "${install[@]}" </dev/null >&2 ||
            die "pip could not install tensorflow-cpu==$k_tf_version from $k_wheels"
    fi
    local got
    got=$(TF_CPP_MIN_LOG_LEVEL=3 "$k_venv/bin/python" -c \
        'import tensorflow as tf; print(tf.__version__)' 2>/dev/null) ||
        die "tensorflow does not import in $k_venv"
    [[ $got == "$k_tf_version" ]] || die "expected TensorFlow $k_tf_version, got \"$got\""
    printf 'tensorflow-cpu==%s\n' "$k_tf_version" >"$k_stamp"
    log "TensorFlow $got ready in $k_venv"
}

main() {
    local check_only=0 arg
    for arg in "$@"; do
        case $arg in
        --check) check_only=1 ;;
        *) usage_or_die "$arg" ;;
        esac
    done

    if [[ -f $k_stamp && -x $k_venv/bin/python ]]; then
        printf '%s\n' "$k_venv/bin/python"
        return 0
    fi
    if ((check_only)); then
        log "TensorFlow $k_tf_version is not installed in $k_venv; run scripts/setup-tensorflow.sh"
        return 1
    fi

    command -v dpkg-query >/dev/null || die "dpkg-query not found: this script supports Debian 12 only"
    install_packages
    mkdir -p -- "$(dirname -- "$k_venv")"
    # One installer at a time; a second caller waits and then finds the stamp.
    exec 9>"$(dirname -- "$k_venv")/.setup-tensorflow.lock"
    flock 9
    if [[ ! -f $k_stamp ]]; then
        local started=$SECONDS
        build_venv
        log "took $((SECONDS - started)) s"
    fi
    printf '%s\n' "$k_venv/bin/python"
}

main "$@"
