#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Worker restarts (--max-restarts): a worker whose trainer fails is started again on its node
# with the same TF_CONFIG and TFSLURM_RESTART_COUNT while the parameter server and the other
# worker keep running, and the step ends 0 with one line per restart; a worker that fails past
# its budget aborts the step naming it and the spent budget, with srun reporting the worker's
# own status; a ps that fails aborts the step even with --max-restarts.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# crash.sh MARKERS FAILS TRAINER ARGS...: rank 2 exits 3 its first FAILS runs (counted in a
# file under MARKERS, visible on every node), then runs the trainer; every other rank runs it.
cat >"$dir/crash.sh" <<'SH'
#!/bin/sh
markers=$1 fails=$2
shift 2
echo "rank $SLURM_PROCID: restart count $TFSLURM_RESTART_COUNT, TF_CONFIG $TF_CONFIG"
if [ "$SLURM_PROCID" = 2 ]; then
    runs=$(cat "$markers/runs" 2>/dev/null || echo 0)
    echo $((runs + 1)) >"$markers/runs"
    if [ "$runs" -lt "$fails" ]; then
        echo "rank 2: crashing"
        exit 3
    fi
fi
exec "$@"
SH
chmod 755 "$dir/crash.sh"

# Layout: rank 0 ps:0 on n1, rank 1 worker:0 on n2, rank 2 worker:1 on n3.
run_step() { # run_step FAILS RUN-OPTIONS...: srun's output; its status in $rc
    local fails=$1 markers
    shift
    markers=$(make_tmpdir)
    chmod 777 "$markers"
    rc=0
    out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge \
        --grace 3 "$@" -- "$dir/crash.sh" "$markers" "$fails" "$E2E_TRAINER" --work-ms 3000 \
        2>&1) || rc=$?
}

# --- a worker that crashes once is restarted and the job ends 0 ---------------------------------
run_step 1 --max-restarts 2
assert_eq 0 "$rc" "the step succeeds after the restart"$'\n'"$out"
line="tfslurm: warning: restarting rank 2 (worker:1) on n3 (restart 1 of 2): exited with status 3"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "one line names the restart"$'\n'"$out"
assert_eq 1 "$(grep -c 'restarting' <<<"$out")" "one restart only"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error line"$'\n'"$out"
# The restarted trainer has the same TF_CONFIG (address and port) and its restart count.
first=$(grep '^rank 2: restart count 0, ' <<<"$out" || true)
second=$(grep '^rank 2: restart count 1, ' <<<"$out" || true)
[[ -n $first && -n $second ]] || fail "rank 2 did not run twice with counts 0 and 1"$'\n'"$out"
assert_eq "${first#*TF_CONFIG }" "${second#*TF_CONFIG }" "the same TF_CONFIG after the restart"
# The ps and the other worker were not restarted: they started once.
assert_eq 1 "$(grep -c '^rank 0: restart count' <<<"$out")" "the ps started once"$'\n'"$out"
assert_eq 1 "$(grep -c '^rank 1: restart count' <<<"$out")" "worker:0 started once"$'\n'"$out"
# The restarted worker did its work with the ps that kept serving.
assert_contains "$out" "tf_trainer[worker:1 rank=2]: exiting with status 0" "the restarted worker's work"
e2e_log "crash once: srun status $rc"

# --- past the budget the step aborts naming the worker and its spent budget ---------------------
run_step 3 --max-restarts 2
assert_eq 3 "$rc" "srun reports the worker's own status"$'\n'"$out"
for n in 1 2; do
    line="tfslurm: warning: restarting rank 2 (worker:1) on n3 (restart $n of 2): exited with status 3"
    assert_eq 1 "$(grep -cF "$line" <<<"$out")" "restart $n is named"$'\n'"$out"
done
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 exited with status 3 (its restart budget is spent: 2 of 2 restarts used)"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "the abort names the rank and the budget"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "no other error line"$'\n'"$out"
e2e_log "crash past the budget: srun status $rc"

# --- the step's total budget --------------------------------------------------------------------
run_step 2 --max-restarts 2 --max-total-restarts 1
assert_eq 3 "$rc" "srun reports the worker's own status"$'\n'"$out"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 exited with status 3 (the step's restart budget is spent: 1 of 1 restarts used)"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "the abort names the step's budget"$'\n'"$out"

# --- a ps failure aborts even with --max-restarts -----------------------------------------------
# The ps fails before it listens: the workers keep retrying to connect (rather than failing on
# a ps that stopped serving, which would make them fail, and be restarted, first).
cat >"$dir/ps_crash.sh" <<'SH'
#!/bin/sh
if [ "$SLURM_PROCID" = 0 ]; then
    sleep 1
    exit 4
fi
exec "$@"
SH
chmod 755 "$dir/ps_crash.sh"
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 3 --max-restarts 2 -- "$dir/ps_crash.sh" "$E2E_TRAINER" --work-ms 60000 \
    2>&1) || rc=$?
assert_eq 4 "$rc" "srun reports the ps's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 0 (ps:0) on n1 exited with status 4"
assert_eq 1 "$(grep -cxF "$line" <<<"$out")" "the ps failure aborts the step"$'\n'"$out"
assert_eq 0 "$(grep -c 'restarting' <<<"$out")" "a ps is never restarted"$'\n'"$out"

no_leftovers 20
e2e_log "PASS"
