#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A failure judged on its node before it is blamed on the node (--on-failure-check): after the
# abort, the failed rank's node runs the built-in checks of --preflight and the command, and rank
# 0's launcher tells what they found in its one line.
# - Failing: a 2-node batch job (of the 3 nodes) with --requeue --max-requeues 1 whose trainer
#   on rank 1 exits 3 in run 1, where the check fails on that node only. Rank 0 names the
#   failure, the failed check and the requeue without that node; the record has a `checked`
#   event; the job's ExcNodeList and comment say so; the requeued run runs on the two other
#   nodes, its rank 0 names the node left out and why, and the job completes.
# - Passing: the same failure in a plain step: the node is kept (no requeue to leave it out of),
#   the line says the check passed, srun exits with the trainer's status.
# - Hanging: a check that does not end is cut at --on-failure-check-timeout, the line says so,
#   and the node is a bad one.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# The site's check: fails on the job's second node in the first run only.
cat >"$dir/check.sh" <<'CHECK'
#!/bin/sh
[ "${SLURM_RESTART_COUNT:-0}" != 0 ] ||
    [ "$(hostname)" != "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 2p)" ]
CHECK
chmod +x "$dir/check.sh"

# Rank 1's trainer exits 3 in the first run; every other trainer leaves a mark.
# shellcheck disable=SC2016 # expanded by the tasks
requeue_job "$dir" --on-failure-check "$dir/check.sh" --events "$dir/step.events" -- \
    sh -c '[ "${SLURM_RESTART_COUNT:-0}" != 0 ] || [ "$SLURM_PROCID" != 1 ] || exit 3
touch "$OUT_DIR/trainer${SLURM_RESTART_COUNT:-0}.$SLURM_PROCID"'
jid=$E2E_JOB

wait_requeued "$jid" 90 "run 0" "$dir/run0*"
bad=$(timeout 10 scontrol show hostnames "$(cat "$dir/nodes0")" | sed -n 2p)
[[ -n $bad ]] || fail "run 0 did not note its nodes"
assert_eq "tfslurm: error: aborting: rank 1 (worker:1) on $bad exited with status 3; node check failed on $bad: command: \"$dir/check.sh\" exited with status 1; requeueing job $jid without $bad (requeue 1 of 1)" \
    "$(grep '^tfslurm: ' "$dir/run0-task0.out")" "run 0: rank 0 names the failure, the failed check and the requeue"
assert_eq 0 "$(grep -c '^tfslurm: ' "$dir/run0-task1.out" || true)" "run 0: rank 1 says nothing"
assert_eq "{\"v\":1,\"event\":\"checked\",\"rank\":1,\"role\":\"worker\",\"index\":1,\"host\":\"$bad\",\"result\":\"failed\",\"check\":\"command\",\"why\":\"\\\"$dir/check.sh\\\" exited with status 1\"}" \
    "$(grep '"event":"checked"' "$dir/step.events" | sed 's/"time":"[^"]*",//')" \
    "run 0: the record has the node check"
assert_eq "$bad" "$(timeout 10 squeue -h -j "$jid" -o %x)" "the requeued job's ExcNodeList"
assert_eq "tfslurm run 1: $bad left out (rank 1 node check failed); no progress" \
    "$(timeout 10 squeue -h -j "$jid" -o %k)" "the requeued job's comment carries why"
# As test_run_requeue_exclude.sh: release the requeued job's begin time, not at once.
sleep 2
run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"

rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 0 "$rc" "job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir"/run1* 2>/dev/null)"
[[ $(timeout 10 scontrol show hostnames "$(cat "$dir/nodes1")") != *"$bad"* ]] ||
    fail "run 1 runs on $(cat "$dir/nodes1"), with $bad that was left out"
assert_eq "srun: 0" "$(cat "$dir/run1.out")" "run 1: the trainers ran"
assert_eq "tfslurm: warning: requeued run 2 of 2: $bad left out (rank 1 node check failed in run 1)" \
    "$(grep '^tfslurm: ' "$dir/run1-task0.out")" "run 1: rank 0 says what was left out and why"
assert_eq "trainer1.0 trainer1.1" "$(cd "$dir" && echo trainer1.*)" "run 1: both trainers ran"
e2e_log "failing check: job $jid requeued without $bad, then completed"

# fail_step CHECK [OPTION...]: a 2-node step whose rank 1 exits 3 while rank 0 trains; prints
# srun's output and then its status.
fail_step() {
    local check=$1 out rc=0
    shift
    # shellcheck disable=SC2016 # expanded by the tasks
    out=$(run_bounded 90 srun -N2 --ntasks-per-node=1 "$E2E_TFSLURM" run --auth munge --grace 3 \
        --on-failure-check "$check" "$@" -- \
        sh -c '[ "$SLURM_PROCID" != 1 ] || exit 3; sleep 60' 2>&1) || rc=$?
    printf '%s\nstatus %s\n' "$out" "$rc"
}

out=$(fail_step 'test -d /')
assert_contains "$out" "status 3" "passing check: srun exits with the trainer's status"
assert_eq 1 "$(grep -cE '^tfslurm: error: aborting: rank 1 \(worker:1\) on (n[0-9]+) exited with status 3; node check passed on \1$' <<<"$out")" \
    "passing check: one line names the failure and the check that passed"$'\n'"$out"
assert_eq 1 "$(grep -c '^tfslurm: ' <<<"$out")" "passing check: no other line"$'\n'"$out"

out=$(fail_step 'sleep 60' --on-failure-check-timeout 2)
assert_contains "$out" "status 3" "hanging check: srun exits with the trainer's status"
assert_eq 1 "$(grep -cE '^tfslurm: error: aborting: rank 1 \(worker:1\) on (n[0-9]+) exited with status 3; node check failed on \1: command: "sleep 60" did not end within 2 s$' <<<"$out")" \
    "hanging check: cut at its timeout, and the line says so"$'\n'"$out"

no_leftovers 20
e2e_log "PASS"
