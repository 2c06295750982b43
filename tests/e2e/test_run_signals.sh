#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Each signal reaches each trainer once, as with plain srun: slurmstepd signals every process of
# the step (the trainer in its PID namespace included), so a launcher does not forward what came
# from slurmstepd, and the stop verdict sends no second SIGTERM. The trainer counts its handler
# runs: one SIGUSR1 under `scancel -s USR1`, one SIGTERM (and one checkpoint) under `scancel`.
# Behind a wrapper that does not exec it (`sh -c 'python3 ...'`: sh dies at once of SIGTERM),
# the real trainer still gets the grace period to save its checkpoint, on `scancel` and when
# the parameter servers are stopped because the workers are done.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)
python=/usr/bin/python3

# counter.py: counts its handler runs; on SIGTERM it "checkpoints" for 1 s (a second SIGTERM
# meanwhile would run the handler again) and writes ckpt.<rank>. A worker given `finish` exits
# by itself once both parameter servers are ready (their ready.<rank> files).
cat >"$dir/counter.py" <<'PY'
import os, signal, sys, time
rank = os.environ.get("SLURM_PROCID", "?")
terms = 0
def say(what):
    os.write(1, f"counter rank={rank}: {what}\n".encode())
def on_usr1(signo, frame):
    say("usr1")
def on_term(signo, frame):
    global terms
    terms += 1
    say("term")
signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_term)
say("ready")
open(os.path.join(sys.argv[1], f"ready.{rank}"), "w").close()
if len(sys.argv) > 2 and os.environ.get("TFSLURM_ROLE") == "worker":
    # Finish only once both parameter servers have their handler: a ps still starting Python
    # when it is stopped would die of SIGTERM without one, whatever the launcher does.
    deadline = time.monotonic() + 30
    while not all(os.path.exists(os.path.join(sys.argv[1], f"ready.{r}")) for r in (0, 1)):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.05)
    sys.exit(0)
while terms == 0:
    signal.pause()
time.sleep(1)
with open(os.path.join(sys.argv[1], f"ckpt.{rank}"), "w") as out:
    out.write("saved\n")
say("checkpointed")
sys.exit(0)
PY

# count OUTPUT RANK EVENT: how many lines say that RANK's trainer saw EVENT.
count() { grep -cx "counter rank=$2: $3" <<<"$1" || true; }

# --- scancel -s USR1, then scancel: each handler runs once ------------------------------------
cat >"$dir/job.sh" <<JOB
#!/bin/bash
srun "\$E2E_TFSLURM" run --ps 1 --auth munge --grace 6 -- $python "$dir/counter.py" "$dir"
JOB
chmod +x "$dir/job.sh"
jid=$(sbatch_submit -N3 --ntasks-per-node=1 --export=ALL -o "$dir/signals.out" "$dir/job.sh")
on_exit "scancel $jid 2>/dev/null || true"
wait_for_lines 'counter rank=[0-2]: ready' 3 60 "$dir/signals.out"
timeout 10 scancel -s USR1 "$jid"
wait_for_lines 'counter rank=[0-2]: usr1' 3 30 "$dir/signals.out"
sleep 1 # room for a second delivery, which would be counted below
timeout 10 scancel "$jid"
rc=0
sbatch_wait "$jid" 60 || rc=$?
out=$(cat "$dir/signals.out")
assert_eq CANCELLED "$E2E_JOB_STATE" "state after scancel (exit $rc)"$'\n'"$out"
for rank in 0 1 2; do
    for event in usr1 term checkpointed; do
        assert_eq 1 "$(count "$out" "$rank" "$event")" "rank $rank: one $event"$'\n'"$out"
    done
done
no_leftovers 20
e2e_log "scancel -s USR1 and scancel: each trainer's handlers ran once"

# --- behind a wrapper (sh runs python without exec): scancel -----------------------------------
rm -f "$dir"/ckpt.*
cat >"$dir/wrapped.sh" <<JOB
#!/bin/bash
srun "\$E2E_TFSLURM" run --ps 1 --auth munge --grace 6 -- sh -c '$python "$dir/counter.py" "$dir"; echo wrapper-after'
JOB
chmod +x "$dir/wrapped.sh"
jid=$(sbatch_submit -N3 --ntasks-per-node=1 --export=ALL -o "$dir/wrapped.out" "$dir/wrapped.sh")
on_exit "scancel $jid 2>/dev/null || true"
wait_for_lines 'counter rank=[0-2]: ready' 3 60 "$dir/wrapped.out"
timeout 10 scancel "$jid"
rc=0
sbatch_wait "$jid" 60 || rc=$?
out=$(cat "$dir/wrapped.out")
assert_eq CANCELLED "$E2E_JOB_STATE" "state after scancel (exit $rc)"$'\n'"$out"
for rank in 0 1 2; do
    assert_eq 1 "$(count "$out" "$rank" term)" "rank $rank: one term behind its wrapper"$'\n'"$out"
    assert_eq saved "$(cat "$dir/ckpt.$rank" 2>/dev/null || true)" \
        "rank $rank: checkpoint saved behind its wrapper"$'\n'"$out"
done
assert_eq 0 "$(grep -c 'wrapper-after' <<<"$out" || true)" "the wrappers died of SIGTERM"$'\n'"$out"
no_leftovers 20
e2e_log "scancel behind a wrapper: 3 of 3 checkpoints saved within the grace period"

# --- behind a wrapper: the workers finish, the parameter servers are stopped -------------------
rm -f "$dir"/ckpt.* "$dir"/ready.*
run_stdout 0 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 2 --auth munge --grace 6 \
    -- sh -c "$python '$dir/counter.py' '$dir' finish; echo wrapper-after"
for rank in 0 1; do
    assert_eq saved "$(cat "$dir/ckpt.$rank" 2>/dev/null || true)" \
        "ps rank $rank: checkpoint saved behind its wrapper"$'\n'"$E2E_OUTPUT"$'\n'"$E2E_STDERR"
done
assert_eq 2 "$(grep -c 'checkpointed' <<<"$E2E_OUTPUT" || true)" \
    "two parameter servers checkpointed"$'\n'"$E2E_OUTPUT"
no_leftovers 20
e2e_log "ps stop behind a wrapper: 2 of 2 checkpoints saved within the grace period"

# --- a signal sent to one launcher alone is still forwarded ------------------------------------
cat >"$dir/alone.sh" <<JOB
#!/bin/bash
srun "\$E2E_TFSLURM" run --ps 1 --auth munge --grace 6 -- $python "$dir/counter.py" "$dir"
JOB
chmod +x "$dir/alone.sh"
jid=$(sbatch_submit -N3 --ntasks-per-node=1 --export=ALL -o "$dir/alone.out" "$dir/alone.sh")
on_exit "scancel $jid 2>/dev/null || true"
wait_for_lines 'counter rank=[0-2]: ready' 3 60 "$dir/alone.out"
mapfile -t pids < <(launcher_pids "${TC_NODE_ARRAY[0]}")
((${#pids[@]} == 1)) || fail "expected 1 launcher on ${TC_NODE_ARRAY[0]}, found: ${pids[*]:-none}"
kill -USR1 "${pids[0]}"
wait_for_lines 'counter rank=[0-2]: usr1' 1 30 "$dir/alone.out"
timeout 10 scancel "$jid"
sbatch_wait "$jid" 60 || true
out=$(cat "$dir/alone.out")
assert_eq 1 "$(grep -c 'counter rank=[0-2]: usr1' <<<"$out" || true)" \
    "kill -USR1 of one launcher: its trainer alone got it, once"$'\n'"$out"
no_leftovers 20
e2e_log "kill -USR1 of one launcher: forwarded to its trainer"
e2e_log "PASS"
