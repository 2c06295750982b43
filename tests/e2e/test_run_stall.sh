#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Stuck ranks (--stall-timeout): a Python trainer that deadlocks (no output, no CPU time, no
# touch of its progress file) prints its threads' stack traces (faulthandler, through the stall
# signal SIGABRT and PYTHONFAULTHANDLER set by tfslurm run), the step aborts with status 9 and
# one line naming the stuck rank, its host and its silence; trainers that report progress by
# touching TFSLURM_PROGRESS_FILE or by using CPU time are not stopped. The line names the stall
# timeout, whatever the sampling or the machine's load (no timing assertion here). Ranks that never
# register are all named, as rank ranges and a hostlist. Another user on the node cannot touch,
# write or remove a rank's progress file.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)
python=/usr/bin/python3

# --- a deadlocked rank is named, dumps its threads, and the step ends ---------------------------
cat >"$dir/stall.py" <<'PY'
import os, pathlib, threading, time

if os.environ["SLURM_PROCID"] == "2":
    lock = threading.Lock()
    lock.acquire()
    threading.Thread(target=lock.acquire, name="peer").start()
    print("rank 2: deadlocked", flush=True)
    lock.acquire()  # never returns: both threads wait for each other
else:
    progress = pathlib.Path(os.environ["TFSLURM_PROGRESS_FILE"])
    while True:
        progress.touch()
        time.sleep(0.5)
PY
rc=0
start=$SECONDS
# (not run_bounded: srun's own status is the point). No bound on the time it takes: a step
# that does not end is cut by the timeout (status 124, not 9).
out=$(timeout -k 5 180 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --grace 3 --stall-timeout 3 --stall-grace 3 -- "$python" "$dir/stall.py" 2>&1) || rc=$?
assert_eq 9 "$rc" "srun reports a stuck rank (124: the step did not end)"$'\n'"$out"
line="tfslurm: error: aborting: rank 2 (worker:1) on n3 is stuck: no progress for 3 s"
assert_eq 1 "$(grep -cF "$line" <<<"$out")" "one line names the stuck rank"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "one line per failure"$'\n'"$out"
# faulthandler's dump of both threads, with their frames in the trainer's file
assert_contains "$out" "Fatal Python error: Aborted" "the Python stack dump"
assert_contains "$out" "Current thread 0x" "the main thread's traceback"
assert_eq 1 "$(grep -c '^Thread 0x.* (most recent call first):' <<<"$out")" \
    "the other thread's traceback"$'\n'"$out"
assert_contains "$out" "File \"$dir/stall.py\", line 8 in <module>" "the deadlocked line"
e2e_log "stall: srun status $rc after $((SECONDS - start)) s"

# --- progress by the progress file or by CPU time: nobody is stopped ----------------------------
cat >"$dir/steady.py" <<'PY'
import os, pathlib, time

end = time.monotonic() + 6
if os.environ["SLURM_PROCID"] == "0":
    progress = pathlib.Path(os.environ["TFSLURM_PROGRESS_FILE"])
    while time.monotonic() < end:  # silent, idle, but touching its progress file
        progress.touch()
        time.sleep(0.5)
else:
    while time.monotonic() < end:  # silent, but computing
        pass
print("rank", os.environ["SLURM_PROCID"], "done", flush=True)
PY
assert_status 0 run_bounded 90 srun -N2 --ntasks-per-node=1 "$E2E_TFSLURM" run --auth munge \
    --stall-timeout 2 -- "$python" "$dir/steady.py"
assert_eq 2 "$(grep -c '^rank [01] done$' <<<"$E2E_OUTPUT")" "both trainers finished"$'\n'"$E2E_OUTPUT"
assert_eq 0 "$(grep -c 'stuck\|tfslurm: error' <<<"$E2E_OUTPUT")" "no stall"$'\n'"$E2E_OUTPUT"

# --- ranks that never register: all named, compactly -------------------------------------------
# Ranks 0-1 on n1, 2-3 on n2, 4-5 on n3; ranks 3 to 5 run no launcher (their tasks exit 0). Rank
# 0's launcher cannot tell an ended task from a hung node's: it cancels the step, whose SIGKILL
# ends rank 0's own task (srun 137).
rc=0
# shellcheck disable=SC2016 # expanded by the task's bash
out=$(timeout -k 5 90 srun -N3 --ntasks-per-node=2 bash -c \
    'case $SLURM_PROCID in 1) echo "step $SLURM_JOB_ID.$SLURM_STEP_ID" ;; [345]) exit 0 ;; esac
     exec "$0" "$@"' "$E2E_TFSLURM" run --ps 1 --auth munge --grace 3 --connect-timeout 3 -- \
    sleep 60 2>&1) || rc=$?
step=$(sed -n 's/^step \([0-9]*\.[0-9]*\)$/\1/p' <<<"$out")
[[ -n $step ]] || fail "task 1 did not say its step"$'\n'"$out"
assert_eq 137 "$rc" "srun reports the cancelled step"$'\n'"$out"
line="tfslurm: error: aborting: ranks 3-5 on n[2-3] did not register within 3 s; cancelling step"
line+=" $step through Slurm"
assert_eq 1 "$(grep -cFx "$line" <<<"$out")" "the missing ranks and hosts"$'\n'"$out"
assert_eq 1 "$(grep -c 'tfslurm: error' <<<"$out")" "one line per failure"$'\n'"$out"

# --- another user cannot fake a rank's progress --------------------------------------------------
# A rank's progress file is its job user's alone (mkstemp: mode 600, a random name): the hostile
# user (nobody) on the same node can neither touch it, date it, write it nor remove it, so it
# cannot keep a stuck rank alive or make a working one look stuck. The trainer idles until the
# test has checked (no stall timeout here: nothing hurries the checks); its file is still
# untouched (time 0) after the attempts.
cat >"$dir/idle.py" <<'PY'
import os, pathlib, sys, time

print("progress file:", os.environ["TFSLURM_PROGRESS_FILE"], flush=True)
while not pathlib.Path(sys.argv[1]).exists():
    time.sleep(0.1)
PY
timeout -k 5 120 srun -N1 -n1 -w n1 -o "$dir/idle.out" "$E2E_TFSLURM" run --auth munge -- \
    "$python" "$dir/idle.py" "$dir/idle.done" >"$dir/idle.srun" 2>&1 &
idle_pid=$!
on_exit "touch $dir/idle.done; kill $idle_pid 2>/dev/null || true"
wait_for_lines '^progress file: ' 1 60 "$dir/idle.out"
progress=$(sed -n 's/^progress file: //p' "$dir/idle.out")
[[ $progress == */tfslurm-progress-* ]] || fail "the trainer's progress file: '$progress'"
assert_eq "600 root 0" "$(stat -c '%a %U %Y' -- "$progress")" \
    "the progress file is the job user's alone, and untouched"
# shellcheck disable=SC2016 # expanded by nobody's shell
hostile=$(timeout -k 5 60 "$E2E_TEST_CLUSTER" node n1 runuser -u nobody -- sh -c '
    touch -m "$1" 2>/dev/null && echo touched || echo "touch refused"
    touch -m -d @2000000000 "$1" 2>/dev/null && echo dated || echo "date refused"
    (: >"$1") 2>/dev/null && echo written || echo "write refused"
    rm -f "$1" 2>/dev/null || echo "remove refused"' _ "$progress" 2>&1) || true
assert_eq $'touch refused\ndate refused\nwrite refused\nremove refused' "$hostile" \
    "nobody's attempts on $progress"
assert_eq "600 root 0" "$(stat -c '%a %U %Y' -- "$progress")" "the progress file after them"
touch "$dir/idle.done"
rc=0
wait "$idle_pid" || rc=$?
assert_eq 0 "$rc" "the idle step ends 0"$'\n'"$(cat "$dir/idle.out" "$dir/idle.srun")"
e2e_log "nobody could not touch, date, write or remove $progress"

no_leftovers
