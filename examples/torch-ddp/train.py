#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch DistributedDataParallel on the variables tfslurm gives every task.

torch.distributed's env:// rendezvous reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE;
LOCAL_RANK picks the GPU. tfslurm sets them (tfslurm env, tfslurm run, srun --tfslurm or a
task prolog), so this needs no torchrun. Every rank all-reduces rank+1 (sum: W(W+1)/2) and
takes one SGD step of a 1-weight model on its own sample; DDP averages the gradients, so every
rank ends with the same weight, 1 - 0.2 * mean((rank+1)^2). Each rank prints one line:

  ddp: rank 1/3 local 0 on n2: all_reduce 6.0 weight 0.0667

Wrong variables never pass silently: a wrong WORLD_SIZE or MASTER_ADDR makes the rendezvous
fail after --timeout seconds.
"""
import argparse
import datetime
import os
import socket

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo",
                        help="gloo (CPU, default) or nccl (one GPU per rank: cuda:LOCAL_RANK)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds for the rendezvous and each collective")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cpu")
    if args.backend == "nccl":
        # tfslurm's default --gpu-bind keeps the node's GPUs visible: cuda:LOCAL_RANK is ours.
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    # Debian's PyTorch 2.x (Debian 13, sid) is built without libuv, which its TCPStore (the
    # env:// rendezvous) uses by default from 2.4 on: ask for the other store (ignored by 1.x).
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group(args.backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout))

    total = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(total)

    model = torch.nn.Linear(1, 1, bias=False).to(device)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if args.backend == "nccl" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    loss = ddp(torch.tensor([[rank + 1.0]], device=device)).pow(2).sum()
    loss.backward()
    optimizer.step()

    print(f"ddp: rank {rank}/{world} local {local_rank} on {socket.gethostname()}:"
          f" all_reduce {total.item():.1f} weight {model.weight.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
