#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Output of many ranks under srun:
#   (a) --label prefixes every line of each trainer's stdout and stderr with its rank, a last
#       line without a newline included, in order within each stream; a normal end prints no
#       line of tfslurm's;
#   (b) a settings error, the same in every task, is printed once (by rank 0's launcher), and
#       srun exits with its status (2).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# --- (a) --label ---------------------------------------------------------------------------------
# shellcheck disable=SC2016 # expanded by the trainer's shell
script='echo "out $SLURM_PROCID"; echo "err $SLURM_PROCID" >&2; echo second; printf partial'
run_stdout 0 60 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --label --auth munge -- \
    bash -c "$script"
expected=""
for rank in 0 1 2; do
    expected+="$rank: out $rank"$'\n'"$rank: second"$'\n'"$rank: partial"$'\n'
done
assert_eq "${expected%$'\n'}" "$(sort -s -k1,1 <<<"$E2E_OUTPUT")" \
    "every stdout line labelled, in order"$'\n'"$E2E_OUTPUT"
assert_eq "0: err 0|1: err 1|2: err 2" "$(sort <<<"$E2E_STDERR" | paste -sd'|')" \
    "every stderr line labelled, and no other line"$'\n'"$E2E_STDERR"
e2e_log "--label: 3 ranks, stdout and stderr labelled"

# --- (b) a settings error is printed once --------------------------------------------------------
rc=0
out=$(run_bounded 60 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --grace soon -- true 2>&1) ||
    rc=$?
assert_eq 2 "$rc" "srun exits with the settings error's status"$'\n'"$out"
assert_eq 1 "$(grep -c '^tfslurm: error: --grace: ' <<<"$out")" "the error is printed once"$'\n'"$out"
assert_eq 0 "$(grep '^tfslurm: ' <<<"$out" | grep -vc '^tfslurm: \(error\|hint\): ' || true)" \
    "no other line of tfslurm's"$'\n'"$out"
e2e_log "a settings error: one line for 3 tasks"

no_leftovers 20
e2e_log "PASS"
