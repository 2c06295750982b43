#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Stalls without false alarms, under srun (1 ps + 3 workers on 2 nodes):
#   (a) --stall-roles' default and --stall-progress output: an idle, silent ps and workers that
#       sleep but print regularly are not stopped (the step ends done, status 0);
#   (b) a worker that is really stuck (deadlocked, silent) while the others print: rank 0 names
#       it as a straggler (rank, role, host) before the stall timeout, with a `straggling` event,
#       then the step aborts naming it (status 9) and only it.
# Nothing here depends on timing but the margins: the straggler window is half the stall
# timeout (10 s of 20 s), while the printing workers are never silent for more than a second.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)
python=/usr/bin/python3

# Ranks 0-1 on n1, 2-3 on n2: ps:0, worker:0, worker:1, worker:2. The ps sleeps without a word;
# the workers print a line every 0.2 s (sleeping in between: next to no CPU time) and, with
# LINES set, end after that many lines; STUCK names the rank that deadlocks after one line.
cat >"$dir/trainer.py" <<'PY'
import os, socket, sys, threading, time

rank = int(os.environ["SLURM_PROCID"])
if rank == 0:
    while True:  # an idle parameter server: no output, no CPU time
        time.sleep(3600)
if str(rank) == os.environ.get("STUCK"):
    print(f"rank {rank}: deadlocked on {socket.gethostname()}", flush=True)
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # never returns
lines = int(os.environ.get("LINES", "0"))
n = 0
while lines == 0 or n < lines:
    n += 1
    print(f"rank {rank}: step {n}", flush=True)
    time.sleep(0.2)
PY

# --- (a) a quiet ps and quiet-but-alive workers are not stopped ----------------------------------
# 90 lines: 18 s of sleep, three times the stall timeout. Its straggler window (3 s) leaves 1.4 s
# beyond the launchers' samples (every 0.6 s) and reports (every second) for a busy machine's
# delays (a 4 s stall timeout left 0.6 s).
assert_status 0 run_bounded 120 env LINES=90 srun -N2 --ntasks-per-node=2 "$E2E_TFSLURM" run \
    --ps 1 --auth munge --stall-timeout 6 --stall-progress output -- "$python" "$dir/trainer.py"
for rank in 1 2 3; do
    assert_eq 1 "$(grep -cx "rank $rank: step 90" <<<"$E2E_OUTPUT")" \
        "worker rank $rank printed all its lines"$'\n'"$E2E_OUTPUT"
done
assert_eq 0 "$(grep -c '^tfslurm: \(error\|warning\)' <<<"$E2E_OUTPUT" || true)" \
    "no stall, no straggler, no error"$'\n'"$E2E_OUTPUT"
e2e_log "(a) an idle ps and printing workers ran to the end"

# --- (b) the stuck worker: a straggler first, then the abort -------------------------------------
rc=0
out=$(STUCK=2 timeout -k 5 180 srun -N2 --ntasks-per-node=2 "$E2E_TFSLURM" run --ps 1 \
    --auth munge --stall-timeout 20 --stall-progress output --stall-grace 2 --grace 3 \
    --events "$dir/step.events" -- "$python" "$dir/trainer.py" 2>&1) || rc=$?
assert_eq 9 "$rc" "srun exits with the stall status"$'\n'"$out"
# Rank 2's node: the second of the two Slurm chose (n2, or n3 when n1 is still busy with the
# step of (a)), as its trainer says.
stuck_host=$(sed -n 's/^rank 2: deadlocked on \(n[0-9]*\)$/\1/p' <<<"$out")
[[ -n $stuck_host ]] || fail "rank 2's trainer did not say where it runs"$'\n'"$out"
straggler="^tfslurm: warning: rank 2 \\(worker:1\\) on $stuck_host is straggling: no progress for [0-9]+ s while 2 of 3 workers progressed in the last 10 s\$"
abort="tfslurm: error: aborting: rank 2 (worker:1) on $stuck_host is stuck: no progress for 20 s"
assert_eq 1 "$(grep -cE "$straggler" <<<"$out" || true)" "one straggler warning"$'\n'"$out"
assert_eq 1 "$(grep -cxF "$abort" <<<"$out" || true)" "the abort names the stuck rank"$'\n'"$out"
assert_eq 0 "$(grep 'straggling\|is stuck' <<<"$out" | grep -vc 'rank 2 (worker:1)' || true)" \
    "no other rank is named"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "one error line"$'\n'"$out"
warned=$(grep -nE "$straggler" <<<"$out" | cut -d: -f1)
aborted=$(grep -nxF "$abort" <<<"$out" | cut -d: -f1)
((warned < aborted)) || fail "the straggler warning comes after the abort"$'\n'"$out"
# The record: the straggler event, then the stall, of rank 2 only.
record=$(grep -o '"event":"\(straggling\|stalled\)","rank":[0-9]*' "$dir/step.events" |
    paste -sd' ')
assert_eq '"event":"straggling","rank":2 "event":"stalled","rank":2' "$record" \
    "the record holds the straggler, then the stall"$'\n'"$(cat "$dir/step.events")"
assert_contains "$(cat "$dir/step.events")" \
    '"event":"stalled","rank":2,"role":"worker","index":1,"host":"'"$stuck_host"'","silent_ms":20000}' \
    "the stall event"
e2e_log "(b) the stuck worker was named a straggler, then the step aborted"

no_leftovers 20
e2e_log "PASS"
