#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `tfslurm top` while a step starts: 4 ranks on n1 and n2 (ranks 1 and 3 followers of their
# node's leader) whose trainers wait for n2's preflight command, which waits for the test.
# Meanwhile every launcher is up and registered, and their heartbeats (the followers' through
# their leaders) carry those phases: `--json` has them for every rank, `--once` shows where the
# start-up time went so far, as `tfslurm events --startup` tells it. Once the trainers started,
# the header is the usual one again.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
dir=$(make_tmpdir)
export HOME=$dir/home
mkdir -p "$HOME"

cat >"$dir/check.sh" <<'CHECK'
#!/bin/sh
# n2's health check takes until the test says so.
if [ "$(hostname)" = n2 ]; then
    while [ ! -e "$DIR/go" ]; do sleep 0.1; done
fi
exit 0
CHECK
cat >"$dir/train.sh" <<'TRAIN'
#!/bin/sh
while [ ! -e "$DIR/end" ]; do sleep 0.2; done
TRAIN
chmod +x "$dir/check.sh" "$dir/train.sh"

settle
DIR=$dir timeout -k 5 120 srun -w n1,n2 -N2 --ntasks-per-node=2 -o "$dir/task%t.out" \
    "$E2E_TFSLURM" run --auth munge --heartbeat 0.5 --preflight-command "$dir/check.sh" \
    -- "$dir/train.sh" >"$dir/srun.out" 2>&1 &
srun_pid=$!
on_exit "touch $dir/go $dir/end; kill $srun_pid 2>/dev/null || true"
job=$(running_job)

# startup: the start-up of top's JSON on stdin, what does not move with the machine.
startup() {
    python3 -c '
import json, sys
s = json.load(sys.stdin)["startup"]
print("reported", s["reported"], "end", s["end"], "slowest", s["slowest"])
for p in s["phases"]:
    print(p["phase"], p["ranks"], "slowest", p["slowest_rank"] in (0, 1, 2, 3))'
}
expected="reported 4 end started slowest None
task 4 slowest True
up 4 slowest True
registered 4 slowest True"
out=
for ((i = 0; i < 150; i++)); do
    out=$(timeout 30 "$E2E_TFSLURM" top --json "$job" 2>/dev/null | startup 2>/dev/null || true)
    [[ $out != "$expected" ]] || break
    sleep 0.2
done
[[ $out == "$expected" ]] || fail "top --json while n2's check runs: expected
$expected
got
$out"

once=$(timeout 30 "$E2E_TFSLURM" top --once "$job") || fail "top --once: status $?"
# The start-up lines, each phase's numbers left out (they move with the machine), the slowest
# rank's name kept.
lines=$(sed -n '4,8p' <<<"$once" |
    sed -E 's/ +-?[0-9]+\.[0-9]{3} s//g; s/rank [0-3] \(worker:[0-3]\) on n[12]$/rank R/')
assert_eq "start-up so far: 4 of 4 ranks reported, 0 trainers started
phase                    median       p90       max  slowest
task started  rank R
launcher up  rank R
registered  rank R" "$lines" "top --once while the step starts"$'\n'"$once"
[[ $(sed -n 9p <<<"$once") == "" ]] || fail "top --once: more start-up lines:
$once"

# The trainers start: the usual header.
touch "$dir/go"
for ((i = 0; i < 150; i++)); do
    once=$(timeout 30 "$E2E_TFSLURM" top --once "$job" 2>/dev/null || true)
    [[ $(sed -n 4p <<<"$once") != "" ]] || break
    sleep 0.2
done
[[ $(sed -n 4p <<<"$once") == "" ]] || fail "top --once once the trainers started:
$once"
grep -q '^worker         4          0          4 ' <<<"$once" ||
    fail "top --once: not every worker running:
$once"

touch "$dir/end"
rc=0
wait "$srun_pid" || rc=$?
[[ $rc == 0 ]] || fail "srun: status $rc; $(cat "$dir/srun.out")"
