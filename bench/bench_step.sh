#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_step: a small step's time with and without tfslurm, on the test cluster (issue #33): for
# each shape (default: 3 nodes x 2 tasks), RUNS steps of each kind, interleaved (one of each per
# round, so that a busy moment of the machine falls on all of them alike):
# - `srun -N3 -n6 true`, the yardstick;
# - `srun -N3 -n6 timeout 600 true`: a minimal supervisor in every task (coreutils' timeout: a
#   small process that forks, runs the command as its child and waits for it), the floor of any
#   launcher that keeps its trainer as a child, as tfslurm's keeper does;
# - `srun -N3 -n6 tfslurm env --only tf`: tfslurm started in every task and its plan made, no
#   coordinator (what the process start, the dynamic loading and the plan cost);
# - `srun -N3 -n6 tfslurm run -- true`: the whole launcher: the plan, the coordinator, the
#   handshakes (proofs included), the trainer, the exits and the stops.
# It prints each kind's median, minimum and maximum wall time and the medians' ratio to the
# yardstick. A benchmark that prints figures, not a test: nothing here asserts speed.
#
#   flock /tmp/tfslurm-e2e.lock bench/bench_step.sh [--before BIN] [E2E_TFSLURM] [RUNS] [NODESxTASKS...]
#
# --before BIN: also `srun ... BIN run -- true`, interleaved with the rest (another build of
# tfslurm, e.g. the commit before a change: its before/after figures in one run).
#
# Needs the test cluster up (scripts/test-cluster up, eval "$(scripts/test-cluster env)";
# docs/test-cluster.md) and, since the cluster is shared, the e2e lock.
set -euo pipefail

before=''
if [[ ${1:-} == --before ]]; then
    before=${2:-}
    [[ -x $before ]] || {
        echo "bench_step: --before: no tfslurm binary at \"$before\"" >&2
        exit 2
    }
    before=$(realpath -- "$before")
    shift 2
fi
bin=${1:-build/dev/cli/tfslurm}
runs=${2:-15}
shift $(($# < 2 ? $# : 2))
shapes=("$@")
((${#shapes[@]})) || shapes=(3x2)
[[ -x $bin ]] || {
    echo "bench_step: no tfslurm binary at \"$bin\"" >&2
    exit 2
}
[[ $runs =~ ^[1-9][0-9]*$ ]] || {
    echo "bench_step: RUNS: expected a positive number of runs, not \"$runs\"" >&2
    exit 2
}
bin=$(realpath -- "$bin")
timeout 10 sinfo -h >/dev/null 2>&1 || {
    echo "bench_step: no Slurm cluster answers (scripts/test-cluster up)" >&2
    exit 2
}

now_us() { date +%s%6N; }
# stats: "median min max" (ms, one decimal) of the microsecond figures on stdin.
stats() {
    sort -n | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f %.1f %.1f\n", m / 1000, v[1] / 1000, v[NR] / 1000 }'
}
# timed LABEL CMD...: run CMD (bounded, output discarded), append its wall time (us) to the
# array named LABEL; a failed step ends the benchmark with its output.
timed() {
    local -n into=$1
    shift
    local start out
    start=$(now_us)
    if ! out=$(timeout -k 5 120 "$@" 2>&1 >/dev/null); then
        echo "bench_step: the step failed: $*: $out" >&2
        exit 1
    fi
    into+=($(($(now_us) - start)))
}

printf 'bench_step: %s runs of each kind per shape, interleaved; tfslurm %s\n' "$runs" "$("$bin" --version)"
printf '%-7s %-34s %28s %8s\n' shape step "median (min to max)" ratio
for shape in "${shapes[@]}"; do
    [[ $shape =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] || {
        echo "bench_step: shape: expected NODESxTASKS_PER_NODE (3x2), not \"$shape\"" >&2
        exit 2
    }
    nodes=${BASH_REMATCH[1]} tasks=$((BASH_REMATCH[1] * BASH_REMATCH[2]))
    step=(srun -N"$nodes" -n"$tasks" --ntasks-per-node="${BASH_REMATCH[2]}")
    # Filled by timed (through a nameref).
    # shellcheck disable=SC2034
    t_plain=() t_keep=() t_env=() t_run=() t_before=()
    # One round first, not counted: the nodes' page cache and slurmd's first step.
    timed t_plain "${step[@]}" true
    timed t_run "${step[@]}" "$bin" run -- true
    # shellcheck disable=SC2034
    t_plain=() t_run=()
    for ((r = 0; r < runs; r++)); do
        timed t_plain "${step[@]}" true
        timed t_keep "${step[@]}" timeout 600 true
        timed t_env "${step[@]}" "$bin" env --only tf
        timed t_run "${step[@]}" "$bin" run -- true
        [[ -z $before ]] || timed t_before "${step[@]}" "$before" run -- true
    done
    read -r base lo hi < <(printf '%s\n' "${t_plain[@]}" | stats)
    printf '%-7s %-34s %14s ms (%s to %s) %8s\n' "$shape" "srun true" "$base" "$lo" "$hi" 1.00
    kinds=(keep env run)
    [[ -z $before ]] || kinds+=(before)
    for kind in "${kinds[@]}"; do
        declare -n figures=t_$kind
        read -r med lo hi < <(printf '%s\n' "${figures[@]}" | stats)
        case $kind in
        keep) what="srun timeout 600 true" ;;
        env) what="srun tfslurm env --only tf" ;;
        run) what="srun tfslurm run -- true" ;;
        before) what="the same with --before's tfslurm" ;;
        esac
        printf '%-7s %-34s %14s ms (%s to %s) %8s\n' "$shape" "$what" "$med" "$lo" "$hi" \
            "$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2f", a / b }')"
        unset -n figures
    done
done
