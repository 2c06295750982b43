#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One hung node does not mark the step's nodes bad (issue #31, timeouts that scale): a 3-node
# batch job runs `tfslurm run --requeue --connect-timeout 5`, whose task on n3 hangs before its
# launcher starts (a node stuck in its prolog, a hung file system). Rank 0's coordinator gives up
# waiting after 5 s: rank 2 on n3 did not register, one node of three, fewer than half, so rank
# 0 requeues the job without n3 alone (its ExcNodeList, and the why in its comment, with no
# progress made), not without the nodes that did register. The requeued job would need three
# nodes of the two left: it is cancelled once it is pending again.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)

cat >"$dir/job.sh" <<'JOB'
#!/bin/bash
run=${SLURM_RESTART_COUNT:-0}
rc=0
# shellcheck disable=SC2016 # expanded by each task
srun -o "$OUT_DIR/run$run-task%t.out" bash -c \
    '[ "$SLURMD_NODENAME" != n3 ] || sleep 60; exec "$E2E_TFSLURM" run --requeue --max-requeues 1 --auth munge --connect-timeout 5 -- sleep 30' ||
    rc=$?
echo "srun: $rc" >"$OUT_DIR/run$run.out"
exit "$rc"
JOB
chmod +x "$dir/job.sh"
jid=$(OUT_DIR=$dir sbatch_submit -N3 --ntasks-per-node=1 --requeue --export=ALL \
    -o /dev/null -e "$dir/job.err" "$dir/job.sh")
on_exit "timeout 10 scancel $jid 2>/dev/null || true"

wait_requeued "$jid" 90 "run 0" "$dir/run0*"
assert_eq "tfslurm: error: aborting: rank 2 (worker:2) on n3 did not register within 5 s; requeueing job $jid without n3 (requeue 1 of 1)" \
    "$(cat "$dir"/run0-task*.out | grep '^tfslurm: ' || true)" \
    "run 0: rank 0 requeues the job without the one node that hung, and says so alone"
assert_eq "n3" "$(timeout 10 squeue -h -j "$jid" -o %x)" "the requeued job's ExcNodeList: n3 alone"
assert_eq "tfslurm run 1: n3 left out (rank 2 did not register); no progress" \
    "$(timeout 10 squeue -h -j "$jid" -o %k)" "the requeued job's comment carries why"
run_bounded 10 scancel "$jid" || fail "cannot cancel job $jid"

no_leftovers 20
e2e_log "PASS"
