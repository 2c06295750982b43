#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TF1 parameter servers and workers (tf4slurm's case), launched by `tfslurm run --ps N`.

Every task starts a tf.distribute.Server for its own entry of TF_CONFIG. A ps joins its server
and serves forever (tfslurm stops it once every worker exited 0); the workers train a small
linear model, y = 2x + 1, with between-graph replication: replica_device_setter puts the
variables on the ps, every worker runs its own graph against them, asynchronously, until the
shared global step reaches --steps, then prints one line and exits. --fail-rank R makes the
worker of rank R raise after its first step (the step then ends with its status).

Without TensorFlow, the task checks its TF_CONFIG as TFConfigClusterResolver reads it
(../common/tf_config_check.py), prints one "tf_config: ... ok" line, then behaves the same:
a ps listens on its address until it is stopped, a worker connects to every ps and exits 0.
"""
import argparse
import os
import socket
import sys
import time

# The shared checker sits next to this directory; no __pycache__ in the (maybe read-only) tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import tf_config_check  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ logs: warnings and up
try:
    import tensorflow as tf
except ImportError:
    tf = None


def train_with_tensorflow(args):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    task_type, task_id = resolver.task_type, resolver.task_id
    rank = os.environ.get("SLURM_PROCID", "?")
    who = f"{task_type} {task_id} (rank {rank} on {socket.gethostname()})"
    # One thread each unless TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS say otherwise.
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=int(os.environ.get("TF_NUM_INTRAOP_THREADS", "0")),
        inter_op_parallelism_threads=int(os.environ.get("TF_NUM_INTEROP_THREADS", "0")))
    if task_type != "ps":
        # A worker's sessions reach the ps and this worker only, not the other workers (between-
        # graph replication): a worker that starts late does not need one that finished and
        # exited, nor one whose server is not up yet.
        config.device_filters.extend(["/job:ps", f"/job:{task_type}/task:{task_id}"])
    if task_type == "ps":
        # Printed before the server starts, hence before any worker can finish.
        print(f"{who}: serving {cluster.task_address(task_type, task_id)}", flush=True)
    server = tf.distribute.Server(cluster, job_name=task_type, task_index=task_id,
                                  protocol=resolver.rpc_layer or "grpc", config=config,
                                  start=True)
    if task_type == "ps":
        server.join()  # never returns: tfslurm stops the ps when the workers are done
        return

    tf.compat.v1.disable_eager_execution()
    setter = tf.compat.v1.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:{task_type}/task:{task_id}")
    with tf.compat.v1.device(setter):
        step = tf.compat.v1.train.get_or_create_global_step()
        w = tf.compat.v1.get_variable("w", initializer=0.0)
        b = tf.compat.v1.get_variable("b", initializer=0.0)
        x = tf.random.uniform([16], -1.0, 1.0)
        loss = tf.reduce_mean(tf.square(w * x + b - (2.0 * x + 1.0)))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.2).minimize(
            loss, global_step=step)
        init = tf.compat.v1.global_variables_initializer()
        ready = tf.compat.v1.report_uninitialized_variables()
    # The first worker initialises the variables on the ps; the others wait until they are
    # (polling every half second, not TensorFlow's default 30 s).
    manager = tf.compat.v1.train.SessionManager(ready_op=ready, recovery_wait_secs=0.5)
    deadline = time.monotonic() + 300
    while True:
        try:
            if task_id == 0:
                session = manager.prepare_session(server.target, init_op=init, config=config)
            else:
                session = manager.wait_for_session(server.target, config=config,
                                                   max_wait_secs=300)
            break
        except tf.errors.UnavailableError:
            # Another task's server is not listening yet: the tasks start within milliseconds
            # of each other, in no order, and TensorFlow 1's session does not wait for them.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    with session:
        if args.fail_rank == int(rank):
            # One step first, whatever the global step is: the other workers may already have
            # reached --steps while this one waited for its session.
            session.run(train_op)
            raise RuntimeError(f"{who} fails on purpose (--fail-rank)")
        while session.run(step) < args.steps:
            session.run(train_op)
        placement = ", ".join(f"{v.op.name} on {v.device}" for v in (w, b))
        print(f"{who}: global step {args.steps} reached; {placement}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="global steps to train")
    parser.add_argument("--fail-rank", type=int, default=-1, metavar="R",
                        help="the worker of rank R raises after one step (a test)")
    args = parser.parse_args()
    if tf is not None:
        train_with_tensorflow(args)
        return 0
    return tf_config_check.run_without_tensorflow("tf1-ps", serving=("ps",), reaching=("ps",))


if __name__ == "__main__":
    sys.exit(main())
