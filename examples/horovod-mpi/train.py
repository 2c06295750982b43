#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Horovod / MPI style: `srun --mpi=pmi2` starts the ranks, tfslurm adds GPUs and torch's
variables.

Horovod (and any MPI) learns its ranks from Slurm's PMI2 server, not from tfslurm; what
tfslurm adds is the rest: each rank's own GPU share (`--gpu-bind task`: hvd.local_rank()'s
device is cuda:0 inside the task) and MASTER_ADDR/RANK/WORLD_SIZE for code that also uses
torch.distributed. The ranks must agree: tfslurm's RANK is Slurm's task id, which is the PMI
rank. With Horovod this all-reduces through Horovod; without it, through torch.distributed
(gloo) on tfslurm's variables, after checking them against PMI_RANK/PMI_SIZE. One line per
rank:

  mpi: rank 1/3 (pmi 1/3) on n2: all_reduce 6.0
"""
import datetime
import os
import socket
import sys

import torch

try:
    import horovod.torch as hvd
except ImportError:
    hvd = None


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    pmi = (int(os.environ.get("PMI_RANK", "-1")), int(os.environ.get("PMI_SIZE", "-1")))
    if pmi != (rank, world):
        print(f"mpi: error: tfslurm says rank {rank}/{world}, PMI says {pmi[0]}/{pmi[1]}"
              " (started without srun --mpi=pmi2?)", file=sys.stderr, flush=True)
        return 1
    value = torch.tensor([rank + 1.0])
    if hvd is not None:
        hvd.init()
        total = hvd.allreduce(value, op=hvd.Sum)
    else:
        import torch.distributed as dist
        # Debian's PyTorch 2.x (Debian 13, sid) is built without libuv, which its TCPStore (the
        # env:// rendezvous) uses by default from 2.4 on: ask for the other store (ignored by 1.x).
        os.environ.setdefault("USE_LIBUV", "0")
        dist.init_process_group("gloo", init_method="env://",
                                timeout=datetime.timedelta(seconds=60))
        dist.all_reduce(value)
        total = value
        dist.destroy_process_group()
    print(f"mpi: rank {rank}/{world} (pmi {pmi[0]}/{pmi[1]}) on {socket.gethostname()}:"
          f" all_reduce {total.item():.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
