#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TF2 MultiWorkerMirroredStrategy on the TF_CONFIG of `tfslurm env` (no launcher needed).

Every task is a worker (the first may be the chief, --chief): all run the same program,
synchronously, and all exit when it is done. Each sees its own share of the node's GPUs
(`--only tf,gpus --gpu-bind task`: TensorFlow takes every visible GPU). Without TensorFlow, the task checks its
TF_CONFIG as TFConfigClusterResolver reads it (../common/tf_config_check.py) and prints one
"tf_config: ... ok" line.
"""
import os
import sys

# The shared checker sits next to this directory; no __pycache__ in the (maybe read-only) tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import tf_config_check  # noqa: E402

try:
    import tensorflow as tf
except ImportError:
    tf = None


def train_with_tensorflow():
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver())
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(1,))])
        model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).batch(8)
    model.fit(data, epochs=2, verbose=0)
    print(f"{strategy.cluster_resolver.task_type}:{strategy.cluster_resolver.task_id}: done",
          flush=True)


def main():
    if tf is not None:
        train_with_tensorflow()
        return 0
    return tf_config_check.run_without_tensorflow("mwms")


if __name__ == "__main__":
    sys.exit(main())
