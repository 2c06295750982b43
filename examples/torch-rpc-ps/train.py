#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A parameter server on torch.distributed.rpc, launched by `tfslurm run --ps N`.

Every task joins one RPC group (the env:// rendezvous on MASTER_ADDR:MASTER_PORT, RANK,
WORLD_SIZE), named after its tfslurm role: ps0, ps1, ..., worker0, worker1, ...
(TFSLURM_ROLE and TFSLURM_TASK_INDEX); the numbers of each come from TF_CONFIG's cluster.

- A parameter server holds one parameter and serves forever, like tf.distribute.Server.join():
  it never exits by itself. tfslurm stops it (SIGTERM) once every worker exited 0.
- A worker pushes its update (worker index + 1) to every ps, waits on ps0 until all workers
  have pushed (the workers' own barrier) and every ps has printed its line (tfslurm stops the
  ps once the workers are done), reads every ps's parameter (then 1+2+...+W) and ends
  its RPC agent without the graceful shutdown, which would wait for the ps forever (see
  `--until` in tfslurm(1)). It prints one line:

    worker 1 (rank 3/4 on n3): ps0=3.0 ps1=3.0

--fail-rank R makes the worker of rank R raise after its push: the job fails, tfslurm names
that rank and its exit status (1) and stops every other task.

Rank 0 must be a parameter server (tfslurm's default --ps-placement first, or spread): it
hosts the rendezvous store, which has to live as long as the job.
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import traceback
import time

import torch
import torch.distributed.rpc as rpc

_lock = threading.Lock()
_param = torch.zeros(1)
_arrived = 0
_serving = 0


def push(update):
    """On a ps: add a worker's update to the parameter."""
    global _param
    with _lock:
        _param = _param + update


def pull():
    """On a ps: the current parameter."""
    with _lock:
        return _param.clone()


def arrive():
    """On ps0: count a worker that has pushed everything; returns how many have."""
    global _arrived
    with _lock:
        _arrived += 1
        return _arrived


def arrived():
    with _lock:
        return _arrived


def announce():
    """On ps0: count a ps that has printed its line; returns how many have."""
    global _serving
    with _lock:
        _serving += 1
        return _serving


def serving():
    with _lock:
        return _serving


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fail-rank", type=int, default=-1,
                        help="the worker of this rank raises after its push")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each RPC")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    role = os.environ["TFSLURM_ROLE"]
    index = int(os.environ["TFSLURM_TASK_INDEX"])
    # Debian's PyTorch 2.x (Debian 13, sid) is built without libuv, which its TCPStore (the
    # env:// rendezvous) uses by default from 2.4 on: ask for the other store (ignored by 1.x).
    os.environ.setdefault("USE_LIBUV", "0")
    options = rpc.TensorPipeRpcBackendOptions(init_method="env://", rpc_timeout=args.timeout)
    rpc.init_rpc(f"{role}{index}", rank=rank, world_size=world, rpc_backend_options=options)

    # Who is who: the jobs of the cluster tfslurm describes in TF_CONFIG.
    cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
    servers = [f"ps{i}" for i in range(len(cluster.get("ps", [])))]
    workers = [f"worker{i}" for i in range(len(cluster.get("worker", [])))]

    if role == "ps":
        print(f"{role}{index} (rank {rank}/{world} on {socket.gethostname()}): serving",
              flush=True)
        rpc.rpc_sync(servers[0], announce)
        while True:  # until tfslurm stops us
            signal.pause()

    try:
        for server in servers:
            rpc.rpc_sync(server, push, args=(torch.tensor([index + 1.0]),))
        if rank == args.fail_rank:
            raise RuntimeError(f"worker {index} (rank {rank}) fails on purpose (--fail-rank)")
        rpc.rpc_sync(servers[0], arrive)
        while rpc.rpc_sync(servers[0], arrived) < len(workers):
            time.sleep(0.05)
        # tfslurm stops the ps once the workers are done: not before each printed its line.
        while rpc.rpc_sync(servers[0], serving) < len(servers):
            time.sleep(0.05)
        values = " ".join(f"{s}={rpc.rpc_sync(s, pull).item():.1f}" for s in servers)
        print(f"worker {index} (rank {rank}/{world} on {socket.gethostname()}): {values}",
              flush=True)
    except Exception:
        # Report the error, then end the RPC agent: a process that exits with a live agent
        # aborts (SIGABRT) in torch's exit handlers, which would hide the real status.
        traceback.print_exc()
        sys.stderr.flush()
        rpc.shutdown(graceful=False)
        return 1
    rpc.shutdown(graceful=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
