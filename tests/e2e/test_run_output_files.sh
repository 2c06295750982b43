#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Per-rank log files under srun (--output/--error with %r %R %h %j %s): each rank's stdout and
# stderr go to files of their own, named by the patterns, with exactly its lines; nothing of
# the trainers reaches srun's stdout or stderr, while the abort line naming the failed rank
# (status 3) still appears on srun's own stderr, once.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

# Ranks 0-1 on n1, 2-3 on n2: ps:0, worker:0, worker:1, worker:2. Every rank writes its lines
# and then a file of its own; rank 3 fails only once every other rank has written (files, not
# sleeps, order it), the others wait to be stopped.
# shellcheck disable=SC2016 # expanded by the trainer's shell
script='echo "out $SLURM_PROCID on $SLURMD_NODENAME"; echo "err $SLURM_PROCID" >&2
printf partial
echo "$SLURM_JOB_ID $SLURM_STEP_ID" >"$0/ids.$SLURM_PROCID"
if [ "$SLURM_PROCID" = 3 ]; then
    while ! [ -e "$0/ids.0" ] || ! [ -e "$0/ids.1" ] || ! [ -e "$0/ids.2" ]; do sleep 0.1; done
    exit 3
fi
exec sleep 600'
rc=0
err=$(mktemp "$E2E_TMPDIR/stderr.XXXXXX")
stdout=$(timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=2 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 3 --output "$dir/%j.%s.%R.%r.%h.out" --error "$dir/%R-%r.err" -- \
    bash -c "$script" "$dir" 2>"$err") || rc=$?
stderr=$(cat -- "$err")
assert_eq 3 "$rc" "srun exits with the failed rank's status"$'\n'"$stdout"$'\n'"$stderr"
line="tfslurm: error: aborting: rank 3 (worker:2) on n2 exited with status 3"
assert_eq 1 "$(grep -cxF "$line" <<<"$stderr" || true)" \
    "the abort line on srun's stderr"$'\n'"$stderr"
# (srun's own lines, `srun: error: n2: task 3: Exited with exit code 3`, may come too)
assert_eq "" "$(grep -v '^tfslurm: \(error\|hint\): \|^srun: ' <<<"$stderr" || true)" \
    "nothing of the trainers on srun's stderr"$'\n'"$stderr"
assert_eq "" "$stdout" "nothing of the trainers on srun's stdout"

read -r job step <"$dir/ids.0"
[[ $job =~ ^[0-9]+$ && $step =~ ^[0-9]+$ ]] || fail "no job and step ids: '$job' '$step'"
roles=(ps worker worker worker)
hosts=(n1 n1 n2 n2)
for rank in 0 1 2 3; do
    out="$dir/$job.$step.${roles[rank]}.$rank.${hosts[rank]}.out"
    [[ -f $out ]] || fail "no $out: $(ls "$dir")"
    assert_eq "out $rank on ${hosts[rank]}"$'\n'"partial" "$(cat -- "$out")" "rank $rank's stdout"
    assert_eq "err $rank" "$(cat -- "$dir/${roles[rank]}-$rank.err")" "rank $rank's stderr"
done
assert_eq 12 "$(find "$dir" -type f | wc -l)" "4 stdout files, 4 stderr files, 4 ids: $(ls "$dir")"
e2e_log "--output/--error: 4 ranks, 8 files, the abort line on srun's stderr"

no_leftovers 20
e2e_log "PASS"
