#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `tfslurm top` against a running step of 4 ranks on n1 and n2 (ranks 1 and 3 followers of
# their node's leader), found by itself from the job id (the endpoint rank 0 publishes in
# ~/.tfslurm/steps):
#   - rank 2's trainer fails once and is restarted: `--once` and `--json` list every rank
#     running, rank 2 with its restart, the roles' counts and the header; `--json` has every
#     rank's start-up phases, which came on the heartbeats (the followers' on their leaders');
#   - rank 3's trainer stops making progress: its launcher reports it stuck and the step
#     aborts, the trainers (which ignore SIGTERM) still running within the grace period: rank 3
#     shows as stuck and the verdict names it;
#   - the live view in a real terminal (tmux): sorted by state, filtered to the ranks that need
#     attention, `q` quits with status 0;
#   - another user (nobody) who names the step's control endpoint is refused by the coordinator
#     in one line; without it, told that the job is not theirs;
#   - an endpoint where nothing listens, and the job once it ended: their clear errors.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
command -v tmux >/dev/null || fail "needs tmux (scripts/setup.sh)"
dir=$(make_tmpdir)
# The published endpoint goes to $HOME/.tfslurm/steps: a home of the test's own.
export HOME=$dir/home
mkdir -p "$HOME"

cat >"$dir/train.sh" <<'TRAIN'
#!/bin/bash
# Every trainer ignores SIGTERM (the abort's) and ends when the test says so; rank 2 fails its
# first run; rank 3 stops touching its progress file once `freeze` exists.
trap '' TERM
if [[ $SLURM_PROCID == 2 && $TFSLURM_RESTART_COUNT == 0 ]]; then exit 3; fi
while [[ ! -e $DIR/end ]]; do
    if [[ $SLURM_PROCID != 3 || ! -e $DIR/freeze ]]; then touch "$TFSLURM_PROGRESS_FILE"; fi
    sleep 0.2
done
TRAIN
chmod +x "$dir/train.sh"

settle
DIR=$dir timeout -k 5 150 srun -w n1,n2 -N2 --ntasks-per-node=2 -o "$dir/task%t.out" \
    "$E2E_TFSLURM" run --auth munge --grace 60 --heartbeat 0.5 --max-restarts 1 \
    --restart-delay 0.1 --stall-timeout 4 --stall-grace 0.5 --stall-progress file -- "$dir/train.sh" \
    >"$dir/srun.out" 2>&1 &
srun_pid=$!
on_exit "touch $dir/end; kill $srun_pid 2>/dev/null || true"
job=$(running_job)

# top_json: `tfslurm top --json JOB` (0 or its error on stderr).
top_json() { timeout 30 "$E2E_TFSLURM" top --json "$job"; }
# fields: each rank's rank, role, host, state and restarts from top's JSON on stdin.
fields() {
    python3 -c '
import json, sys
doc = json.load(sys.stdin)
print(doc["verdict"], doc["size"], doc["nodes"], doc["job_state"])
for r in doc["ranks"]:
    print(r["rank"], "%s:%d" % (r["role"], r["index"]), r["host"], r["state"], r["restarts"])'
}
# wait_for TEXT: poll top until its fields() show TEXT (at most 60 s).
wait_for() {
    local i out=
    for ((i = 0; i < 120; i++)); do
        out=$(top_json 2>/dev/null | fields 2>/dev/null || true)
        if grep -qxF -- "$1" <<<"$out"; then
            return 0
        fi
        sleep 0.5
    done
    fail "top never showed \"$1\"; last: $out"
}

# wait_for_all EXPECTED WHAT: poll top until its fields() are EXPECTED as a whole (at most 30 s):
# a rank's report that a busy machine delays may show it straggling for a moment.
wait_for_all() {
    local i out=
    for ((i = 0; i < 60; i++)); do
        out=$(top_json 2>/dev/null | fields 2>/dev/null || true)
        [[ $out != "$1" ]] || return 0
        sleep 0.5
    done
    fail "top --json $2: expected
$1
got
$out"
}

# --- every rank running, rank 2 restarted once ---------------------------------------------------
wait_for "2 worker:2 n2 running 1"
wait_for "3 worker:3 n2 running 0"
wait_for_all "none 4 2 RUNNING
0 worker:0 n1 running 0
1 worker:1 n1 running 0
2 worker:2 n2 running 1
3 worker:3 n2 running 0" "while every rank runs"
# The start-up's phases came on the heartbeats, the followers' (ranks 1 and 3) on their leaders':
# every rank reached every phase (no address exchange), while the step runs.
startup() {
    python3 -c '
import json, sys
s = json.load(sys.stdin)["startup"]
print("reported", s["reported"], "end", s["end"], "more nodes", s["more_nodes"])
for p in s["phases"]:
    print(p["phase"], p["ranks"], "slowest", p["slowest_rank"] in (0, 1, 2, 3))
print("nodes", " ".join(sorted(n["host"] for n in s["slowest_nodes"])))
print("slowest", s["slowest"]["rank"] in (0, 1, 2, 3), s["slowest"]["phase"] is not None)'
}
expected="reported 4 end progress more nodes 0
task 4 slowest True
up 4 slowest True
registered 4 slowest True
started 4 slowest True
progress 4 slowest True
nodes n1 n2
slowest True True"
for ((i = 0; i < 100; i++)); do
    out=$(top_json 2>/dev/null | startup 2>/dev/null || true)
    [[ $out != "$expected" ]] || break
    sleep 0.2
done
[[ $out == "$expected" ]] || fail "top --json: the start-up: expected
$expected
got
$out"
# The header (no start-up figures: every trainer started), the roles' counts, and each rank's
# deterministic columns (CPU, memory, progress and output move with the machine); asked again
# while a rank shows straggling for a moment (at most 30 s).
expected="0 worker:0 n1 running 0
1 worker:1 n1 running 0
2 worker:2 n2 running 1
3 worker:3 n2 running 0"
for ((i = 0; i < 60; i++)); do
    once=$(timeout 30 "$E2E_TFSLURM" top --once "$job") || fail "top --once: status $?"
    rows=$(awk '$1 ~ /^[0-9]+$/ { print $1, $2, $3, $4, $8 }' <<<"$once")
    [[ $rows != "$expected" ]] || break
    sleep 0.5
done
[[ $rows == "$expected" ]] || fail "top --once: rows:
$rows"
head1="job $job step 0 (run tfslurm-$job-0) on n[1-2]: 2 nodes, 4 ranks"
[[ $(sed -n 1p <<<"$once") == "$head1" ]] || fail "top --once: header: $(sed -n 1p <<<"$once")"
grep -q '^state RUNNING, elapsed [0-9]*:[0-9][0-9], no time limit, requeued 0 times, restarts 1$' \
    <<<"$once" || fail "top --once: state line: $(sed -n 2p <<<"$once")"
[[ $(sed -n 3p <<<"$once") == "verdict: none yet" ]] || fail "top --once: $(sed -n 3p <<<"$once")"
roles=$(grep '^worker ' <<<"$once" | tr -s ' ')
[[ $roles == "worker 4 0 4 0 0 0 0 0 0" ]] || fail "top --once: roles: $roles"

# --- rank 3 stuck: the step aborts, its trainers still running in their grace period ----------
touch "$dir/freeze"
wait_for "3 worker:3 n2 stuck 0"
wait_for_all "aborted 4 2 RUNNING
0 worker:0 n1 running 0
1 worker:1 n1 running 0
2 worker:2 n2 running 1
3 worker:3 n2 stuck 0" "once stuck"
once=$(timeout 30 "$E2E_TFSLURM" top --once "$job")
verdict="verdict: aborted: rank 3 (worker:3) on n2 is stuck: no progress for 4 s"
[[ $(sed -n 3p <<<"$once") == "$verdict" ]] || fail "top --once: $(sed -n 3p <<<"$once")"
grep -q '^      3  worker:3       n2               \*stuck ' <<<"$once" ||
    fail "top --once: rank 3 not marked stuck:
$once"

# --- the live view in a terminal ------------------------------------------------------------------
session=tfslurm-top-$$-$RANDOM
on_exit "tmux kill-session -t $session 2>/dev/null || true"
tmux new-session -d -s "$session" -x 150 -y 30 \
    "NO_COLOR=1 HOME=$HOME $E2E_TFSLURM top $job; echo \"top-status \$?\" > $dir/top.status"
# screen_has TEXT: the pane shows a line containing TEXT within 20 s.
screen_has() {
    local i
    for ((i = 0; i < 100; i++)); do
        if tmux capture-pane -p -t "$session" 2>/dev/null | grep -F -- "$1" >/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    fail "the live view never showed \"$1\"; screen:
$(tmux capture-pane -p -t "$session" 2>/dev/null || true)"
}
screen_has "ranks 1-4 of 4 listed (4 in the step)  sort: rank  filter: all"
screen_has "verdict: aborted: rank 3 (worker:3) on n2 is stuck"
tmux send-keys -t "$session" s
screen_has "sort: state"
# Sorted by state, the stuck rank comes first.
first=$(tmux capture-pane -p -t "$session" | awk '$1 ~ /^[0-9]+$/ && !seen { print $1, $4; seen = 1 }')
[[ $first == "3 *stuck" ]] || fail "sorted by state, the first row is \"$first\""
tmux send-keys -t "$session" f
screen_has "ranks 1-1 of 1 listed (4 in the step)  sort: state  filter: attention"
tmux send-keys -t "$session" q
for ((i = 0; i < 100; i++)); do
    [[ ! -s $dir/top.status ]] || break
    sleep 0.1
done
[[ $(cat "$dir/top.status" 2>/dev/null) == "top-status 0" ]] ||
    fail "q: $(cat "$dir/top.status" 2>/dev/null || echo 'top did not end')"

# --- another user -----------------------------------------------------------------------------------
read -r _ endpoint_line < <(cat "$HOME/.tfslurm/steps/$job.0")
port=$(grep -o 'port=[0-9]*' <<<"$endpoint_line" | cut -d= -f2)
address=$(timeout 10 scontrol show node n1 | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
as_nobody=("${E2E_TC_EXEC[@]}" runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" HOME=/nonexistent)
# The binary where nobody can run it (it needs only glibc).
chmod 711 "$E2E_TMPDIR" "$dir"
mkdir "$dir/bin"
cp -- "$E2E_TFSLURM" "$dir/bin/tfslurm"
chmod 755 "$dir/bin" "$dir/bin/tfslurm"
rc=0
err=$(timeout 30 "${as_nobody[@]}" "$dir/bin/tfslurm" top --once "$job" 2>&1) || rc=$?
[[ $rc == 2 && $err == "tfslurm: error: top: job $job is not yours: it belongs to root (uid 0); a step is watched by its own user only: \"$job\"" ]] ||
    fail "another user's top: status $rc: $err"
rc=0
err=$(timeout 30 "${as_nobody[@]}" "$dir/bin/tfslurm" top --once --control "$address:$port" "$job" 2>&1) ||
    rc=$?
[[ $rc == 7 && $err == "tfslurm: error: top: step $job.0's coordinator refused this watcher: \"munge credential of another user, which munged decodes for that user only ("* ]] ||
    fail "another user's watcher: status $rc: $err"
[[ $(wc -l <<<"$err") == 1 ]] || fail "another user's watcher: more than one line: $err"

# --- nothing listening; the ended job ---------------------------------------------------------
rc=0
err=$(timeout 30 "$E2E_TFSLURM" top --once --control 127.0.0.1:1 "$job" 2>&1) || rc=$?
[[ $rc == 7 && $err == "tfslurm: error: top: cannot reach step $job.0's coordinator at 127.0.0.1 (127.0.0.1:1): Connection refused" ]] ||
    fail "nothing listening: status $rc: $err"

touch "$dir/end"
rc=0
wait "$srun_pid" || rc=$?
[[ $rc == 9 ]] || fail "srun: status $rc (expected 9, the stalled step's); $(cat "$dir/srun.out")"
[[ ! -e $HOME/.tfslurm/steps/$job.0 ]] || fail "the published endpoint was left behind"
for ((i = 0; i < 100; i++)); do
    state=$(timeout 10 scontrol -o show job "$job" | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
    [[ $state == RUNNING || $state == COMPLETING ]] || break
    sleep 0.2
done
rc=0
err=$(timeout 30 "$E2E_TFSLURM" top --once "$job" 2>&1) || rc=$?
[[ $rc == 7 && $err == "tfslurm: error: top: job $job is not running (state $state)" ]] ||
    fail "the ended job: status $rc: $err"
e2e_log "top: every rank, a restart, a stuck rank, the live view, another user refused"
