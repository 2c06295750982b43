#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Build the libFuzzer targets with the "fuzz" CMake preset (clang, ASan/UBSan) and run each
# one for TFSLURM_FUZZ_SECONDS seconds (default 10) on a scratch copy of its seed corpus
# (tests/fuzz/corpus/<target>/, never modified; for hostlist also every list of the example
# table tests/data/hostlists.tsv).
#
#   scripts/fuzz.sh                    every target: hostlist counts ports protocol
#   scripts/fuzz.sh hostlist           only the named targets
#   TFSLURM_FUZZ_SECONDS=600 scripts/fuzz.sh
#
# A crash, a violated invariant (abort), a leak, a timeout or running out of memory fails the
# script: the offending inputs are copied to tests/fuzz/regressions/<target>/ and printed.
# Fix the bug, keep the file (the fuzz-replay tests and the unit tests replay it).
set -euo pipefail

readonly prog=fuzz.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly root
readonly seconds=${TFSLURM_FUZZ_SECONDS:-10}
readonly build_dir="$root/build/fuzz"
readonly all_targets=(hostlist counts ports protocol)

if [[ ! $seconds =~ ^[1-9][0-9]*$ ]]; then
    echo "$prog: TFSLURM_FUZZ_SECONDS must be a positive number of seconds, not '$seconds'" >&2
    exit 2
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=("${all_targets[@]}")
fi
build_targets=()
for target in "${targets[@]}"; do
    if [[ ! -d "$root/tests/fuzz/corpus/$target" ]]; then
        echo "$prog: unknown target '$target' (known: ${all_targets[*]})" >&2
        exit 2
    fi
    build_targets+=("tfslurm_fuzz_$target")
done

cd "$root"
cmake --preset fuzz
cmake --build --preset fuzz --target "${build_targets[@]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# table_seeds DIR: one seed file per example of tests/data/hostlists.tsv (the list column,
# escapes undone), named table-<line>.
table_seeds() {
    local dir=$1 number=0 line rest
    while IFS= read -r line; do
        number=$((number + 1))
        [[ -z $line || $line == \#* ]] && continue
        # Fields by hand: with IFS=tab, read would merge the tabs around an empty list.
        rest=${line#*$'\t'}
        rest=${rest#*$'\t'}
        rest=${rest#*$'\t'}
        printf '%b' "${rest%%$'\t'*}" >"$dir/table-$number"
    done <tests/data/hostlists.tsv
}

failed=()
for target in "${targets[@]}"; do
    corpus="$work/$target/corpus"
    artifacts="$work/$target/artifacts"
    mkdir -p "$corpus" "$artifacts"
    cp -R "tests/fuzz/corpus/$target/." "$corpus/"
    if [[ $target == hostlist ]]; then
        table_seeds "$corpus"
    fi
    echo "== $prog: fuzzing $target for ${seconds}s"
    status=0
    "$build_dir/tests/fuzz/fuzz_$target" \
        -max_len=4096 \
        -max_total_time="$seconds" \
        -timeout=25 \
        -rss_limit_mb=4096 \
        -print_final_stats=1 \
        -artifact_prefix="$artifacts/" \
        "$corpus" >"$work/$target.log" 2>&1 || status=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|INFO: seed)' \
        "$work/$target.log" || true
    shopt -s nullglob
    found=("$artifacts"/*)
    shopt -u nullglob
    if [[ $status -ne 0 || ${#found[@]} -gt 0 ]]; then
        failed+=("$target")
        echo "!! $prog: $target failed (exit status $status); the end of its log:" >&2
        tail -n 40 "$work/$target.log" >&2
        mkdir -p "tests/fuzz/regressions/$target"
        for file in "${found[@]}"; do
            cp "$file" "tests/fuzz/regressions/$target/"
            echo "!! saved tests/fuzz/regressions/$target/$(basename "$file"):" >&2
            od -c "$file" | head -n 20 >&2
        done
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "$prog: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "$prog: no crash in ${targets[*]} (${seconds}s each)"
