#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# TF1 parameter servers and workers with real TensorFlow (tf4slurm's case):
# examples/tf1-ps-worker/job.sbatch, as shipped, on the three nodes: the ps start a
# tf.distribute.Server and join() forever, the four workers train against them (variables on
# the ps, placed by replica_device_setter) and exit. The job must end 0 once the workers are
# done, with both ps stopped by tfslurm's SIGTERM (no SIGKILL after the grace), and leave
# nothing on any node. Then a worker that raises: the step ends with its status (1) and one
# line naming it, and again leaves nothing.
# Layout of -N3 --ntasks-per-node=2 with --ps 2 --ps-placement spread: ps:0 is rank 0 on n1,
# ps:1 rank 2 on n2; workers 0..3 are ranks 1 (n1), 3 (n2), 4 and 5 (n3).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")

# ports: the derived ports depend on the job id; the lines are compared without them.
no_ports() { sed -E 's/(serving [^ ]+):[0-9]+$/\1:PORT/'; }

e2e_log "sbatch examples/tf1-ps-worker/job.sbatch"
jid=$(sbatch_submit -D "$EXAMPLES/tf1-ps-worker" -o "$dir/job.out" \
    "$EXAMPLES/tf1-ps-worker/job.sbatch")
rc=0
sbatch_wait "$jid" 300 || rc=$?
out=$(cat "$dir/job.out")
assert_eq 0 "$rc" "job $jid ended $E2E_JOB_STATE:"$'\n'"$out"
placement="w on /job:ps/task:1, b on /job:ps/task:0"
assert_eq "$(printf '%s\n' \
    "ps 0 (rank 0 on ${n[0]}): serving ${n[0]}:PORT" \
    "ps 1 (rank 2 on ${n[1]}): serving ${n[1]}:PORT" \
    "worker 0 (rank 1 on ${n[0]}): global step 200 reached; $placement" \
    "worker 1 (rank 3 on ${n[1]}): global step 200 reached; $placement" \
    "worker 2 (rank 4 on ${n[2]}): global step 200 reached; $placement" \
    "worker 3 (rank 5 on ${n[2]}): global step 200 reached; $placement")" \
    "$(grep -E '^(ps|worker) [0-9]' <<<"$out" | no_ports | sort)" \
    "what the ps and the workers printed"
assert_eq "tfslurm: info: coordinator: the work is done (every worker exited 0): stopping 2 remaining ranks
tfslurm: info: rank 0 (ps:0): the work is done: stopping the trainer
tfslurm: info: rank 0 (ps:0): trainer stopped (was killed by signal 15 (Terminated))
tfslurm: info: rank 2 (ps:1): the work is done: stopping the trainer
tfslurm: info: rank 2 (ps:1): trainer stopped (was killed by signal 15 (Terminated))" \
    "$(grep '^tfslurm:' <<<"$out" | sort)" "tfslurm stops both ps with SIGTERM, nothing else"
no_leftovers 20

e2e_log "srun -N3 -n3 tfslurm run --ps 1 -- python3 train.py --fail-rank 2"
# Per-task files: srun may drop the last lines of a step whose tasks were killed.
run_stdout 1 240 srun -N3 --ntasks-per-node=1 -o "$dir/fail-%t.out" \
    tfslurm run --ps 1 --rpc-layer grpc --grace 5 -- \
    python3 "$EXAMPLES/tf1-ps-worker/train.py" --fail-rank 2
assert_eq "tfslurm: error: aborting: rank 2 (worker:1) on ${n[2]} exited with status 1" \
    "$(cat "$dir"/fail-*.out | grep '^tfslurm: error')" \
    "the failing worker, named once, with its status"
assert_contains "$(cat "$dir/fail-2.out")" \
    "RuntimeError: worker 1 (rank 2 on ${n[2]}) fails on purpose (--fail-rank)" \
    "the worker's own error"
no_leftovers 20
e2e_log "PASS"
