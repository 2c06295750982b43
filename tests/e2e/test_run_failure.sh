#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A worker that fails on another node ends the whole step at once: one line names the failing
# rank, role, host and status (printed by the failing rank's launcher), srun exits with the
# failing trainer's own status (every launcher exits with it: srun reports the highest), the
# other workers (still "training") and the ps are stopped, and nothing is left on any node.
# The same when the ps fails. From Slurm 26.05, Slurm itself sends SIGTERM (then SIGKILL after
# KillWait) to a step's other tasks after a bad exit: the verdict must not change (run on every
# release by scripts/test.sh). Slurm's accounting agrees: sacct records the step, and the job,
# as failed with the culprit's status.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# Layout: rank 0 ps:0 on n1, ranks 1..5 workers; worker:3 is rank 4 on n3.
rc=0
name=e2e-failure-$$-worker
out=$(run_bounded 90 srun -J "$name" -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 5 "$E2E_TRAINER" --work-ms 60000 --on worker:3 --work-ms 500 --exit-code 1 2>&1) || rc=$?
assert_eq 1 "$rc" "srun reports the failing trainer's status"$'\n'"$out"
line="tfslurm: error: aborting: rank 4 (worker:3) on n3 exited with status 1"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "one line names the failure"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "no other error line"$'\n'"$out"
# The other workers were stopped, not finished: no one else exited 0 on its own.
assert_eq 0 "$(grep -c 'exiting with status 0' <<<"$out")" "workers stopped early"$'\n'"$out"
e2e_log "worker exit 1: srun status $rc"

# srun's own lines agree: every task ended with the culprit's status (from Slurm 26.05, Slurm
# itself also ends a step's other tasks after a bad exit: the verdict must stay the same).
assert_eq 0 "$(grep '^srun: error: ' <<<"$out" | grep -vc 'Exited with exit code 1$')" \
    "srun reports status 1 for every task"$'\n'"$out"
records=$(sacct_of "$name" 30 "FAILED|1:0 FAILED|1:0")
assert_eq "FAILED|1:0 FAILED|1:0" "$(cut -d'|' -f2- <<<"$records" | tr '\n' ' ' | sed 's/ $//')" \
    "sacct: the job and its step failed with the worker's status"$'\n'"$records"

# The ps fails, once every worker is busy (each worker leaves a marker, the ps waits for all
# five): one line names the ps, srun exits with its status, the workers are stopped.
# shellcheck disable=SC2016 # expanded by the trainer's shell
crash='if [ "$TFSLURM_ROLE" = ps ]; then
    while [ "$(ls "$DIR" | wc -l)" -lt 5 ]; do sleep 0.1; done; echo "ps exits 3"; exit 3
fi
touch "$DIR/r$SLURM_PROCID"; sleep 60; echo "worker $SLURM_PROCID finished"'
rc=0
name=e2e-failure-$$-ps
out=$(run_bounded 90 env DIR="$(make_tmpdir)" srun -J "$name" -N3 --ntasks-per-node=2 "$E2E_TFSLURM" \
    run --ps 1 --auth munge --grace 5 -- bash -c "$crash" 2>&1) || rc=$?
assert_eq 3 "$rc" "srun reports the ps's status"$'\n'"$out"
assert_eq "tfslurm: error: aborting: rank 0 (ps:0) on n1 exited with status 3" \
    "$(grep 'tfslurm: error' <<<"$out")" "one line names the ps"$'\n'"$out"
assert_eq 0 "$(grep '^srun: error: ' <<<"$out" | grep -vc 'Exited with exit code 3$')" \
    "srun reports status 3 for every task"$'\n'"$out"
assert_eq 0 "$(grep -c 'finished' <<<"$out")" "workers stopped early"$'\n'"$out"
records=$(sacct_of "$name" 30 "FAILED|3:0 FAILED|3:0")
assert_eq "FAILED|3:0 FAILED|3:0" "$(cut -d'|' -f2- <<<"$records" | tr '\n' ' ' | sed 's/ $//')" \
    "sacct: the job and its step failed with the ps's status"$'\n'"$records"
e2e_log "ps exit 3: srun status $rc"

# A worker killed by a signal: its launcher exits 128 + 11, and so do the others.
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run --ps 1 --auth munge --grace 5 -- \
    "$E2E_TRAINER" --work-ms 60000 --on worker:1 --work-ms 500 --signal 11 2>&1) || rc=$?
assert_eq 139 "$rc" "srun reports 128 + the trainer's signal"$'\n'"$out"
assert_eq 1 "$(grep -cF "aborting: rank 2 (worker:1) on n2 was killed by signal 11 (Segmentation fault)" <<<"$out")" \
    "one line names the signal"$'\n'"$out"

# A command that does not exist: one clear line, no hang until the registration timeout.
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --auth munge -- \
    no-such-trainer-binary 2>&1) || rc=$?
assert_eq 127 "$rc" "srun reports the launcher's 127"$'\n'"$out"
assert_contains "$out" 'could not start its trainer: trainer: command not found in PATH: "no-such-trainer-binary"' \
    "missing command"

no_leftovers 20
e2e_log "PASS"
