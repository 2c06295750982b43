#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A node that fails its health checks is left out of the requeued run: a 2-node batch job (of
# the 3 nodes) runs `tfslurm run --preflight-command CHECK --requeue --max-requeues 1`, where
# CHECK fails on the job's second node of run 1 only. No trainer starts; rank 0's launcher says
# which node failed which check and that it requeues the job without it (status 13 is the
# step's, 11 rank 0's), and the job's ExcNodeList and comment say so. The requeued run runs on
# the two other nodes, its rank 0 names the node left out and why, every check passes and the
# job completes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# The site's check: fails on the job's second node in the first run only (SLURM_RESTART_COUNT
# unset or 0).
cat >"$dir/check.sh" <<'CHECK'
#!/bin/sh
[ "${SLURM_RESTART_COUNT:-0}" != 0 ] ||
    [ "$(hostname)" != "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 2p)" ]
CHECK
chmod +x "$dir/check.sh"

# shellcheck disable=SC2016 # expanded by the tasks
requeue_job "$dir" --preflight-command "$dir/check.sh" -- \
    sh -c 'touch "$OUT_DIR/trainer${SLURM_RESTART_COUNT:-0}.$SLURM_PROCID"'
jid=$E2E_JOB

wait_requeued "$jid" 90 "run 0" "$dir/run0*"
bad=$(timeout 10 scontrol show hostnames "$(cat "$dir/nodes0")" | sed -n 2p)
[[ -n $bad ]] || fail "run 0 did not note its nodes"
assert_eq "tfslurm: error: aborting: preflight failed on $bad (rank 1, worker:1): command: \"$dir/check.sh\" exited with status 1; requeueing job $jid without $bad (requeue 1 of 1)" \
    "$(grep '^tfslurm: ' "$dir/run0-task0.out")" "run 0: rank 0 names the node and requeues the job without it"
assert_eq 0 "$(grep -c '^tfslurm: ' "$dir/run0-task1.out" || true)" "run 0: rank 1 says nothing"
assert_eq "" "$(compgen -G "$dir/trainer0.*" || true)" "run 0: no trainer started"
assert_eq "$bad" "$(timeout 10 squeue -h -j "$jid" -o %x)" "the requeued job's ExcNodeList"
assert_eq "tfslurm run 1: $bad left out (rank 1 preflight failed); no progress" \
    "$(timeout 10 squeue -h -j "$jid" -o %k)" "the requeued job's comment carries why"
# As test_run_requeue_exclude.sh: release the requeued job's begin time, not at once.
sleep 2
run_bounded 10 scontrol update JobId="$jid" StartTime=now || fail "cannot release job $jid"

rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 0 "$rc" "job $jid exit code (state $E2E_JOB_STATE): $(cat "$dir"/run1* 2>/dev/null)"
[[ $(timeout 10 scontrol show hostnames "$(cat "$dir/nodes1")") != *"$bad"* ]] ||
    fail "run 1 runs on $(cat "$dir/nodes1"), with $bad that was left out"
assert_eq "srun: 0" "$(cat "$dir/run1.out")" "run 1: every check passed, the trainers ran"
assert_eq "tfslurm: warning: requeued run 2 of 2: $bad left out (rank 1 preflight failed in run 1)" \
    "$(grep '^tfslurm: ' "$dir/run1-task0.out")" "run 1: rank 0 says what was left out and why"
assert_eq "trainer1.0 trainer1.1" "$(cd "$dir" && echo trainer1.*)" "run 1: both trainers ran"

no_leftovers 20
e2e_log "PASS"
