#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scancel and a time limit stop a running tfslurm step cleanly: Slurm's SIGTERM reaches every
# launcher, which stops its trainer (the whole step stops with the grace period), and nothing is
# left on any node. The time limit has minute resolution in Slurm: this part takes ~1-2 min.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# Every role serves forever: only a signal can end this job.
cat >"$dir/job.sh" <<'JOB'
#!/bin/bash
srun "$E2E_TFSLURM" run --ps 1 --auth munge --grace 3 -- "$E2E_TRAINER" --on worker --serve
JOB
chmod +x "$dir/job.sh"

jid=$(sbatch_submit -N3 --ntasks-per-node=1 --export=ALL -o "$dir/cancel.out" "$dir/job.sh")
on_exit "scancel $jid 2>/dev/null || true"
wait_for_lines 'serving forever' 3 60 "$dir/cancel.out"
timeout 10 scancel "$jid"
rc=0
sbatch_wait "$jid" 60 || rc=$?
assert_eq CANCELLED "$E2E_JOB_STATE" "state after scancel (exit $rc)"
no_leftovers 20
assert_contains "$(cat "$dir/cancel.out")" "received signal 15 (Terminated)" "launchers saw SIGTERM"
# Never a rank's failure: a trainer may die of scancel's SIGTERM before its launcher's copy.
assert_eq 0 "$(grep -c 'aborting:' "$dir/cancel.out")" "a cancel, not a failure"$'\n'"$(cat "$dir/cancel.out")"
e2e_log "scancel: job $jid cancelled, nothing left"

jid=$(sbatch_submit -N3 --ntasks-per-node=1 --time=1 --export=ALL -o "$dir/limit.out" "$dir/job.sh")
on_exit "scancel $jid 2>/dev/null || true"
rc=0
sbatch_wait "$jid" 200 || rc=$?
assert_eq TIMEOUT "$E2E_JOB_STATE" "state after the time limit (exit $rc)"$'\n'"$(cat "$dir/limit.out")"
no_leftovers 20
assert_contains "$(cat "$dir/limit.out")" "received signal 15 (Terminated)" "launchers saw SIGTERM"
e2e_log "time limit: job $jid timed out, nothing left"
e2e_log "PASS"
