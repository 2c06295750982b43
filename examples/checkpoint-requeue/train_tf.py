#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The checkpoint contract of `tfslurm run --checkpoint-before`, the TensorFlow way.

TensorFlow's own tf.distribute.experimental.PreemptionCheckpointHandler does the work: told by
a TerminationConfig that the signal tfslurm sends (SIGUSR1, `--checkpoint-signal`) means
"about to be stopped", it lets every worker of the MultiWorkerMirroredStrategy finish the same
step, saves a checkpoint (the chief writes it to CHECKPOINT_DIR) and calls the exit function,
here an exit with status 0, which tfslurm takes as "checkpointed". With `--requeue` the job
comes back, the handler restores the checkpoint and training resumes from the saved step: the
step counter is a variable of the checkpoint.

The signal handler only sets a flag (TensorFlow's watcher thread polls it once a second):
nothing else can safely run inside a Python signal handler. It is installed before TensorFlow
is imported, so a signal that comes early is not lost.
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time

checkpoint_requested = threading.Event()
signal.signal(signal.SIGUSR1, lambda signo, frame: checkpoint_requested.set())

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ logs: warnings and up
# Not on Google Cloud: the handler would otherwise ask the metadata server first (5 s).
os.environ.setdefault("GCE_METADATA_IP", "127.0.0.1:9")
import tensorflow as tf  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "100000")),
                        help="steps in all runs together (default: $STEPS or 100000)")
    parser.add_argument("--step-seconds", type=float, default=0.05,
                        help="time one step takes (a stand-in for real work)")
    parser.add_argument("--resume-steps", type=int, default=0, metavar="N",
                        help="after resuming from a checkpoint, train only N more steps (a "
                        "short demonstration of the requeue; default: up to --steps)")
    args = parser.parse_args()
    checkpoint_dir = os.environ.get("CHECKPOINT_DIR", ".")
    run = int(os.environ.get("SLURM_RESTART_COUNT", "0"))

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    who = f"{resolver.task_type}:{resolver.task_id} on {socket.gethostname()}"
    with strategy.scope():
        w = tf.Variable(0.0, name="w")
        step = tf.Variable(0, dtype=tf.int64, name="step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    checkpoint = tf.train.Checkpoint(w=w, step=step)
    def exit_after_save():
        print(f"{who}: checkpoint saved at step {int(step.numpy())} in run {run}; "
              "exiting for the requeue", flush=True)
        sys.exit(0)

    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        resolver, checkpoint, checkpoint_dir,
        tf.distribute.experimental.TerminationConfig(
            termination_watcher_fn=checkpoint_requested.is_set, exit_fn=exit_after_save,
            grace_period=0))
    start = int(step.numpy())  # restored from the checkpoint by the handler, 0 on a first run
    print(f"{who}: starting at step {start} in run {run}", flush=True)
    last = args.steps
    if start > 0 and args.resume_steps > 0:
        last = min(last, start + args.resume_steps)

    @tf.function
    def train_step():
        def replica_step():
            grad = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.MEAN, 2.0 * (w - 3.0))
            w.assign_sub(0.01 * grad)
            step.assign_add(1)
        strategy.run(replica_step)

    while step.numpy() < last:
        handler.run(train_step)
        time.sleep(args.step_seconds)  # a stand-in for real work
    print(f"{who}: done at step {int(step.numpy())} in run {run}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
