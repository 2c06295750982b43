#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A trainer that keeps the checkpoint contract of `tfslurm run --checkpoint-before`.

The checkpoint signal (SIGUSR1 by default) only sets a flag: the handler runs between two
bytecodes of whatever the trainer was doing, so saving there could write a half-updated state
or deadlock on a lock the interrupted code holds. The training loop looks at the flag after
each step, saves outside the handler and exits 0. With `--requeue`, the job then comes back
(SLURM_RESTART_COUNT one higher) and resumes from the checkpoint. Each step reached is also
written into $TFSLURM_PROGRESS_FILE: the start-up timeline's first progress, and the record
that stops a requeue loop whose runs all end at the same step. TFSLURM_RUN_ID, the same in
every run of the job, names the run for a logger.
"""
import json
import os
import signal
import sys
import time

STEPS = int(os.environ.get("STEPS", "1000"))
rank = os.environ.get("TFSLURM_RANK", os.environ.get("SLURM_PROCID", "0"))
path = os.path.join(os.environ.get("CHECKPOINT_DIR", "."), f"checkpoint.{rank}.json")

save_requested = False


def request_save(signo, frame):
    global save_requested
    save_requested = True  # nothing else here: the loop saves


signal.signal(signal.SIGUSR1, request_save)

step = 0
if os.path.exists(path):
    with open(path) as f:
        step = json.load(f)["step"]
restart = os.environ.get("SLURM_RESTART_COUNT", "0")
run_id = os.environ.get("TFSLURM_RUN_ID", "?")
print(f"rank {rank}: starting at step {step} (run {restart} of {run_id})", flush=True)
progress = os.environ.get("TFSLURM_PROGRESS_FILE")


def report_progress(step):
    if progress:
        with open(progress, "w") as f:
            f.write(f"{step}\n")


while step < STEPS:
    time.sleep(0.1)  # one training step
    step += 1
    report_progress(step)
    if save_requested:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"step": step}, f)
        os.replace(tmp, path)  # atomic: a killed save leaves the previous checkpoint
        print(f"rank {rank}: saved step {step}; exiting for the requeue", flush=True)
        sys.exit(0)

print(f"rank {rank}: done after {step} steps", flush=True)
