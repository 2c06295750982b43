#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_pmi2: the PMI2 address exchange of `tfslurm env` on the test cluster (3 nodes x N tasks,
# N = 1, 4, 16), next to its yardstick, the plain `tfslurm env` of the same step. A benchmark
# that prints figures, not a test: nothing here asserts speed.
#
#   flock /tmp/tfslurm-e2e.lock bench/bench_pmi2.sh [E2E_TFSLURM] [RUNS]
#
# Needs the test cluster up (scripts/test-cluster up; docs/test-cluster.md) and, since the
# cluster is shared, the e2e lock. For each N it runs RUNS steps of each kind and prints:
# - exchange: the slowest task's time inside exchange_addresses_pmi2() (load libpmi2, init, put,
#   fence, gets, finalize; its `-v` log line), median over the runs;
# - step wall time of `srun --mpi=pmi2 -N3 -n3N -O tfslurm env --iface ib0 --exchange pmi2`
#   against `srun --mpi=pmi2 -N3 -n3N -O tfslurm env` (no exchange), medians.
set -euo pipefail

bin=${1:-build/dev/cli/tfslurm}
runs=${2:-5}
[[ -x $bin ]] || { echo "bench_pmi2: no tfslurm binary at $bin" >&2; exit 2; }
bin=$(realpath -- "$bin")
timeout 10 sinfo -h >/dev/null 2>&1 || { echo "bench_pmi2: no Slurm cluster answers (scripts/test-cluster up)" >&2; exit 2; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now_us() { date +%s%6N; }

printf '%-8s %-10s %22s %20s %20s\n' nodes tasks "exchange (slowest task)" "step with pmi2" "step without"
for per_node in 1 4 16; do
    tasks=$((3 * per_node))
    exchange=() with=() without=()
    for ((r = 0; r < runs; r++)); do
        start=$(now_us)
        log=$(timeout -k 5 120 srun --mpi=pmi2 -N3 -n"$tasks" -O "$bin" -v env --iface ib0 \
            --exchange pmi2 --only tf 2>&1 >/dev/null) || { echo "bench_pmi2: step failed: $log" >&2; exit 1; }
        with+=($(($(now_us) - start)))
        exchange+=("$(grep -oE 'exchanged in [0-9]+ us' <<<"$log" | awk '{ print $3 }' | sort -n | tail -1)")
        start=$(now_us)
        timeout -k 5 120 srun --mpi=pmi2 -N3 -n"$tasks" -O "$bin" env --only tf >/dev/null
        without+=($(($(now_us) - start)))
    done
    printf '%-8s %-10s %19.1f ms %17.1f ms %17.1f ms\n' 3 "$tasks" \
        "$(printf '%s\n' "${exchange[@]}" | median | awk '{ print $1 / 1000 }')" \
        "$(printf '%s\n' "${with[@]}" | median | awk '{ print $1 / 1000 }')" \
        "$(printf '%s\n' "${without[@]}" | median | awk '{ print $1 / 1000 }')"
done
