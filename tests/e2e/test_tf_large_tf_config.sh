#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A TF_CONFIG too large for the environment reaches TensorFlow through a file: in a real step of
# three tasks (one per node) each task describes itself as the first task of its node in a plan
# of 15,000 tasks (5,000 per node: SLURM_STEP_TASKS_PER_NODE, SLURM_GTIDS, SLURM_PROCID, ...
# rewritten, so that tfslurm's own consistency checks still pass). Its TF_CONFIG is about
# 165 KB, over Linux's 128 KiB per environment string: plain `tfslurm env` refuses it (status 6,
# with the way out), `tfslurm env --tf-config-file auto` writes it to a file in the task's
# TMPDIR with a sitecustomize shim on PYTHONPATH, and TensorFlow's TFConfigClusterResolver, in
# the TensorFlow venv's python, reads the whole cluster and this task's place in it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tf_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/tf_lib.sh"
use_tensorflow
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")

# What each task runs: the simulated place, plain env (expected to fail), then the file.
cat >"$dir/task.sh" <<'TASK'
#!/bin/bash
set -euo pipefail
per=5000
first=$((SLURM_NODEID * per))
export SLURM_STEP_TASKS_PER_NODE="$per(x$SLURM_STEP_NUM_NODES)" SLURM_TASKS_PER_NODE="$per(x$SLURM_STEP_NUM_NODES)"
export SLURM_STEP_NUM_TASKS=$((per * SLURM_STEP_NUM_NODES)) SLURM_NTASKS=$((per * SLURM_STEP_NUM_NODES))
export SLURM_NPROCS=$SLURM_NTASKS SLURM_PROCID=$first SLURM_LOCALID=0 SLURM_DISTRIBUTION=block
SLURM_GTIDS=$(seq -s, "$first" $((first + per - 1)))
export SLURM_GTIDS TMPDIR=$OUT_DIR/tmp.$SLURM_NODEID
unset SLURM_STEP_RESV_PORTS # the 2 reserved ports are not 5,001: derived ports instead
mkdir -p "$TMPDIR"
rc=0
err=$(tfslurm env --only tf 2>&1 >/dev/null) || rc=$?
echo "plain $SLURM_PROCID: status $rc: ${err%%$'\n'*}"
vars=$(tfslurm env --only tf --tf-config-file auto)
eval "$vars"
exec python3 - <<'PY'
import os, socket
import tensorflow as tf
text = os.environ["TF_CONFIG"]  # put there by the sitecustomize shim, from the file
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
spec = resolver.cluster_spec()
address = spec.task_address(resolver.task_type, resolver.task_id)
host = socket.gethostname()
where = os.path.dirname(os.environ["TFSLURM_TF_CONFIG_FILE"]) == os.environ["TMPDIR"]
print(f"large {os.environ['SLURM_PROCID']} on {host}: {len(text) > 128 * 1024} over 128 KiB, "
      f"file in TMPDIR {where}; {spec.num_tasks('worker')} workers; "
      f"{resolver.task_type}:{resolver.task_id} at {address.rsplit(':', 1)[0]}:PORT", flush=True)
PY
TASK
chmod 755 "$dir/task.sh"

e2e_log "srun -N3 --ntasks-per-node=1, each task a node's first of 15,000: tfslurm env --tf-config-file auto"
run_stdout 0 180 env OUT_DIR="$dir" srun -N3 --ntasks-per-node=1 "$dir/task.sh"
expected=
for i in 0 1 2; do
    rank=$((i * 5000))
    # 165,069 bytes plus the digits of the task's index (the derived ports have 5 digits).
    expected+="plain $rank: status 6: tfslurm: error: TF_CONFIG: $((165069 + ${#rank})) bytes for 15000 tasks do not fit in one environment variable (Linux allows 131072 bytes per NAME=value string)"$'\n'
    expected+="large $rank on ${n[i]}: True over 128 KiB, file in TMPDIR True; 15000 workers; worker:$rank at ${n[i]}:PORT"$'\n'
done
assert_eq "$(sort <<<"${expected%$'\n'}")" \
    "$(grep -E '^(plain|large) ' <<<"$E2E_OUTPUT" | sort)" \
    "every task: plain env refused, TensorFlow reads the 15,000-task TF_CONFIG from the file"
no_leftovers 20
e2e_log "PASS"
