#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TensorFlow's own cluster resolvers as the oracle for tfslurm, inside one task of a real step.

Run by tests/e2e/test_tf_resolvers.sh in every task, with the TensorFlow venv's python and
E2E_TFSLURM set. Prints two lines (stdout), each a comparison that must hold:

native RANK on HOST: TYPE:ID at ADDRESS; TFConfigClusterResolver == tfslurm plan
    TFConfigClusterResolver, reading the TF_CONFIG of `tfslurm env`, gives the cluster of
    `tfslurm plan --json` and this rank's role, and this rank's address is on the host it
    runs on. With --gpus, the CUDA_VISIBLE_DEVICES that tfslurm gives this task.

tf-compat RANK on HOST: TYPE:ID at ADDRESS [CUDA_VISIBLE_DEVICES=...]; SlurmClusterResolver ==
tfslurm env --layout tf-compat[; TensorFlow puts rank RANK on OTHER]
    SlurmClusterResolver, with the same jobs and ports (and GPU) arguments, gives the cluster,
    the task and the CUDA_VISIBLE_DEVICES of `tfslurm env --layout tf-compat`. When that
    address is on another host than the one Slurm runs the rank on (TensorFlow sorts the hosts
    and assumes block placement), the line says so: the difference is TensorFlow's.

Any disagreement is printed as "MISMATCH ..." and the exit status is 1.

Options: --ps N, --chief (roles, given to tfslurm and as SlurmClusterResolver's jobs), --gpus
(compare CUDA_VISIBLE_DEVICES: auto_set_gpu=True and tfslurm's gpus group; without it the GPU
arguments are 1 per task, which TensorFlow needs even on CPU-only nodes), --visible-devices
LIST (the task's CUDA_VISIBLE_DEVICES).
"""
import argparse
import json
import os
import socket
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

resolvers = tf.distribute.cluster_resolver


def tfslurm(*args, env=None):
    out = subprocess.run([os.environ["E2E_TFSLURM"], *args], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout


def mismatch(what, tensorflow, tfslurm_value):
    print(f"MISMATCH rank {os.environ['SLURM_PROCID']}: {what}: TensorFlow {tensorflow!r}, "
          f"tfslurm {tfslurm_value!r}", flush=True)
    return 1


def native(role_args, rank, host, gpus):
    # TensorFlow takes every GPU it sees: with several tasks per node, each its own share.
    out = json.loads(tfslurm("env", "--format", "json", "--only", "tf,gpus" if gpus else "tf",
                             "--gpu-bind", "task", *role_args))
    tf_config = out["TF_CONFIG"]
    plan = json.loads(tfslurm("plan", "--json", *role_args))
    os.environ["TF_CONFIG"] = tf_config
    resolver = resolvers.TFConfigClusterResolver()
    spec = resolver.cluster_spec().as_dict()
    task_type, task_id = resolver.task_type, resolver.task_id  # read from TF_CONFIG each time
    me = plan["ranks"][rank]
    failed = 0
    if spec != plan["cluster"]:
        failed |= mismatch("native cluster", spec, plan["cluster"])
    if (task_type, task_id) != (me["role"], me["index"]):
        failed |= mismatch("native task", (task_type, task_id), (me["role"], me["index"]))
    address = resolver.cluster_spec().task_address(task_type, task_id)
    if address.rsplit(":", 1)[0] != host or me["host"] != host:
        failed |= mismatch("native host", address, f"{me['host']} (runs on {host})")
    del os.environ["TF_CONFIG"]
    visible = f" CUDA_VISIBLE_DEVICES={out.get('CUDA_VISIBLE_DEVICES')}" if gpus else ""
    print(f"native {rank} on {host}: {task_type}:{task_id} at {address}"
          f"{visible}; TFConfigClusterResolver == tfslurm plan", flush=True)
    return failed


def tf_compat(role_args, jobs, rank, host, gpus):
    what = "tf,gpus" if gpus else "tf"
    out = json.loads(tfslurm("env", "--layout", "tf-compat", "--format", "json", "--only", what,
                             "--port-base", "8888", *role_args))
    compat = json.loads(out["TF_CONFIG"])
    visible_before = os.environ.get("CUDA_VISIBLE_DEVICES")
    if gpus:
        resolver = resolvers.SlurmClusterResolver(jobs=jobs, port_base=8888, auto_set_gpu=True)
    else:
        # TensorFlow's range() over the GPUs fails with 0 GPUs per task: it needs one each.
        resolver = resolvers.SlurmClusterResolver(jobs=jobs, port_base=8888, gpus_per_node=64,
                                                  gpus_per_task=1, auto_set_gpu=False)
    spec = resolver.cluster_spec().as_dict()
    task_type, task_id = resolver.get_task_info()
    failed = 0
    if spec != compat["cluster"]:
        failed |= mismatch("tf-compat cluster", spec, compat["cluster"])
    if (task_type, task_id) != (compat["task"]["type"], compat["task"]["index"]):
        failed |= mismatch("tf-compat task", (task_type, task_id), compat["task"])
    address = spec[task_type][task_id]
    line = f"tf-compat {rank} on {host}: {task_type}:{task_id} at {address}"
    if gpus:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible != out.get("CUDA_VISIBLE_DEVICES"):
            failed |= mismatch("tf-compat CUDA_VISIBLE_DEVICES", visible,
                               out.get("CUDA_VISIBLE_DEVICES"))
        line += f" CUDA_VISIBLE_DEVICES={visible} (was {visible_before})"
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_before or ""
    line += "; SlurmClusterResolver == tfslurm env --layout tf-compat"
    if address.rsplit(":", 1)[0] != host:
        line += f"; TensorFlow puts rank {rank} on {address.rsplit(':', 1)[0]}"
    print(line, flush=True)
    return failed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps", type=int, default=0)
    parser.add_argument("--chief", action="store_true")
    parser.add_argument("--gpus", action="store_true")
    parser.add_argument("--visible-devices", metavar="LIST",
                        help="CUDA_VISIBLE_DEVICES of this task, as a newer Slurm would set it "
                        "(slurmd removes a value that it did not set from the task's environment)")
    args = parser.parse_args()
    if args.visible_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.visible_devices
    rank = int(os.environ["SLURM_PROCID"])
    host = socket.gethostname()
    role_args = ["--ps", str(args.ps)] + (["--chief"] if args.chief else [])
    ntasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
    jobs = {"worker": ntasks - args.ps - (1 if args.chief else 0)}
    if args.ps:
        jobs["ps"] = args.ps
    if args.chief:
        jobs["chief"] = 1
    failed = native(role_args, rank, host, args.gpus)
    failed |= tf_compat(role_args, jobs, rank, host, args.gpus)
    return failed


if __name__ == "__main__":
    sys.exit(main())
