#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TF2 MultiWorkerMirroredStrategy on the TF_CONFIG of `tfslurm env` (no launcher needed).

Every task is a worker (the first may be the chief, --chief): all run the same program,
synchronously, and all exit when it is done. Each task trains a small linear model
(y = 2x + 1) on its own data for --steps steps; the gradients are summed across the tasks by
collective all-reduces over the addresses of TF_CONFIG, so every task ends with the same
weights, which it prints exactly (float32 as hex). Each sees its own share of the node's GPUs
(`--only tf,gpus --gpu-bind task`: TensorFlow takes every visible GPU).

Without TensorFlow, the task checks its TF_CONFIG as TFConfigClusterResolver reads it
(../common/tf_config_check.py) and prints one "tf_config: ... ok" line.
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
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    task_type, task_id = resolver.task_type, resolver.task_id
    address = resolver.cluster_spec().task_address(task_type, task_id)
    # This task's data: 16 points of y = 2x + 1 of its own, so that only the all-reduce of the
    # gradients keeps the tasks' weights equal.
    seed = sorted(resolver.cluster_spec().as_dict()).index(task_type) * 100 + task_id
    x = tf.random.stateless_uniform([16], seed=[seed, 1], minval=-1.0, maxval=1.0)
    y = 2.0 * x + 1.0
    with strategy.scope():
        w = tf.Variable(0.0, name="w")
        b = tf.Variable(0.0, name="b")

    @tf.function
    def train_step():
        def replica_step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(w * x + b - y))
            grads = tape.gradient(loss, [w, b])
            # The sum over every replica of every task: a collective op across the nodes.
            grads = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.MEAN, grads)
            w.assign_sub(0.2 * grads[0])
            b.assign_sub(0.2 * grads[1])
        strategy.run(replica_step)

    for _ in range(args.steps):
        train_step()
    weights = " ".join(f"{v.name.split(':')[0]}={float(v.numpy()).hex()}" for v in (w, b))
    print(f"{task_type}:{task_id} at {address} on {socket.gethostname()}: "
          f"{args.steps} steps, {strategy.num_replicas_in_sync} replicas in sync, weights {weights}",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="synchronous training steps")
    args = parser.parse_args()
    if tf is not None:
        train_with_tensorflow(args)
        return 0
    return tf_config_check.run_without_tensorflow("mwms")


if __name__ == "__main__":
    sys.exit(main())
