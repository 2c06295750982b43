#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# TF2 ParameterServerStrategy with real TensorFlow: examples/tf2-parameter-server/job.sbatch, as
# shipped (`tfslurm run --ps 2 --chief --until chief`), on the three nodes. The ps and the
# workers serve forever; the chief schedules 50 training steps on the workers through a
# ClusterCoordinator (the variables on the ps) and exits. The job must end 0 with the step
# counter on the ps at exactly 50 (every scheduled step ran on a worker), the three workers and
# the two ps stopped by tfslurm's SIGTERM (no SIGKILL), and nothing left on any node.
# Layout of -N3 --ntasks-per-node=2, --ps 2 --chief: ps:0 and ps:1 are ranks 0 and 1 on n1,
# the chief rank 2 on n2, workers 0..2 ranks 3 (n2), 4 and 5 (n3).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")

e2e_log "sbatch examples/tf2-parameter-server/job.sbatch"
jid=$(sbatch_submit -D "$EXAMPLES/tf2-parameter-server" -o "$dir/job.out" \
    "$EXAMPLES/tf2-parameter-server/job.sbatch")
rc=0
sbatch_wait "$jid" 300 || rc=$?
out=$(cat "$dir/job.out")
assert_eq 0 "$rc" "job $jid ended $E2E_JOB_STATE:"$'\n'"$out"
ps_device=/job:ps/replica:0/task
assert_eq "$(printf '%s\n' \
    "chief 0 (rank 2 on ${n[1]}): 50 steps run on the workers; w on $ps_device:0/device:CPU:0, b on $ps_device:1/device:CPU:0, steps_run on $ps_device:0/device:CPU:0" \
    "ps 0 (rank 0 on ${n[0]}): serving ${n[0]}:PORT" \
    "ps 1 (rank 1 on ${n[0]}): serving ${n[0]}:PORT" \
    "worker 0 (rank 3 on ${n[1]}): serving ${n[1]}:PORT" \
    "worker 1 (rank 4 on ${n[2]}): serving ${n[2]}:PORT" \
    "worker 2 (rank 5 on ${n[2]}): serving ${n[2]}:PORT")" \
    "$(grep -E '^(chief|ps|worker) [0-9]' <<<"$out" | sed -E 's/(serving [^ ]+):[0-9]+$/\1:PORT/' | sort)" \
    "what the chief, the ps and the workers printed"
expected="tfslurm: info: coordinator: the work is done (the chief exited 0): stopping 5 remaining ranks"
for rank_role in "0 (ps:0)" "1 (ps:1)" "3 (worker:0)" "4 (worker:1)" "5 (worker:2)"; do
    expected+=$'\n'"tfslurm: info: rank $rank_role: the work is done: stopping the trainer"
    expected+=$'\n'"tfslurm: info: rank $rank_role: trainer stopped (was killed by signal 15 (Terminated))"
done
assert_eq "$(sort <<<"$expected")" "$(grep '^tfslurm:' <<<"$out" | sort)" \
    "tfslurm stops the ps and the workers with SIGTERM once the chief is done, nothing else"
no_leftovers 20
e2e_log "PASS"
