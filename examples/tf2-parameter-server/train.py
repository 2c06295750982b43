#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TF2 ParameterServerStrategy, launched by `tfslurm run --ps N --chief --until chief`.

The ps and the workers only run a tf.distribute.Server and serve forever; the chief is the
coordinator: it builds the strategy on TFConfigClusterResolver, schedules --steps training
steps of a small linear model (y = 2x + 1, variables on the ps) on the workers through a
ClusterCoordinator, waits for them and exits. Its exit ends the step (--until chief): tfslurm
then stops the workers and the ps. The chief prints the step counter kept on the ps, which
counts the steps the workers really ran.

Without TensorFlow, every task checks its TF_CONFIG as TFConfigClusterResolver reads it
(../common/tf_config_check.py), prints one "tf_config: ... ok" line and behaves the same: ps
and workers listen on their addresses until they are stopped, the chief connects to every one
of them and exits 0.
"""
import argparse
import os
import socket
import sys

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
    task_type, task_id = resolver.task_type, resolver.task_id
    who = (f"{task_type} {task_id} (rank {os.environ.get('SLURM_PROCID', '?')} on "
           f"{socket.gethostname()})")
    if task_type in ("ps", "worker"):
        # Printed before the server starts, hence before the chief can finish.
        print(f"{who}: serving {resolver.cluster_spec().task_address(task_type, task_id)}",
              flush=True)
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=task_type,
                                      task_index=task_id,
                                      protocol=resolver.rpc_layer or "grpc", start=True)
        server.join()  # never returns: tfslurm stops it once the chief exited 0
        return

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(0.0, name="w")
        b = tf.Variable(0.0, name="b")
        steps_run = tf.Variable(0, dtype=tf.int64, name="steps_run")

    @tf.function
    def train_step():
        x = tf.random.uniform([16], -1.0, 1.0)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(w * x + b - (2.0 * x + 1.0)))
        grad_w, grad_b = tape.gradient(loss, [w, b])
        w.assign_sub(0.2 * grad_w)
        b.assign_sub(0.2 * grad_b)
        steps_run.assign_add(1)
        return loss

    for _ in range(args.steps):
        coordinator.schedule(train_step)
    coordinator.join()
    placement = ", ".join(f"{v.name.split(':')[0]} on {v.device}" for v in (w, b, steps_run))
    print(f"{who}: {int(steps_run.numpy())} steps run on the workers; {placement}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps to schedule")
    args = parser.parse_args()
    if tf is not None:
        train_with_tensorflow(args)
        return 0
    return tf_config_check.run_without_tensorflow(
        "tf2-ps", serving=("ps", "worker"), reaching=("ps", "worker"))


if __name__ == "__main__":
    sys.exit(main())
