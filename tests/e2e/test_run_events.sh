#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The record of a failed step (--events FILE): rank 0's launcher writes every event of the step
# as it happens, one version-1 JSON object per line, and `tfslurm events FILE` tells it as a
# timeline. A worker on n3 exits 1 in a 1 ps + 2 worker step on three nodes: the file holds the
# step (with its run id, TFSLURM_RUN_ID), three registrations and starts, the failure with its
# launcher's start-up phases, the verdict naming it and the exits (and start-ups) of the two
# trainers the verdict stopped (SIGTERM), in an order that only the registrations and the
# stopped exits may vary. Then a step whose trainer on n2 reports its first progress 3 s late:
# `tfslurm events --startup` names n2, rank 1 and the phase.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
events=$dir/step.events
# Every trainer notes that it started and waits until all three have: worker:1 fails only then
# (a trainer starts after its own rank's registration, and Slurm may start n2's task late).
# shellcheck disable=SC2016 # expanded by the task's shell
all_started='touch "$0/started-$SLURM_PROCID"
for ((i = 0; i < 600; i++)); do [[ -e $0/started-0 && -e $0/started-1 && -e $0/started-2 ]] && break; sleep 0.1; done
exec "$@"'
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge --grace 5 \
    --events "$events" -- bash -c "$all_started" "$dir" "$E2E_TRAINER" --work-ms 60000 \
    --on worker:1 --work-ms 500 --exit-code 1 2>&1) || rc=$?
assert_eq 1 "$rc" "srun reports the failing worker's status"$'\n'"$out"
[[ -s $events ]] || fail "no event file at $events"$'\n'"$out"
job=$(sed -nE '1s/.*"job":"([0-9]+)".*/\1/p' "$events")
[[ -n $job ]] || fail "the first line is not the step: $(head -1 "$events")"

# Every line is version 1 with a time of the documented form; then compare without the times.
assert_eq 0 "$(grep -cvE '^\{"v":1,"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z",' "$events")" \
    "every line starts with the version and the time"$'\n'"$(cat "$events")"
# The start-up phases' times vary: each becomes T.
mapfile -t lines < <(sed -E 's/"time":"[^"]*",//; s/"(task|up|registered|started)":"[^"]*"/"\1":T/g' "$events")
story=$(printf '%s\n' "${lines[@]}")
assert_eq 14 "${#lines[@]}" "fourteen events"$'\n'"$story"
cluster=$(run_bounded 10 scontrol show config | sed -nE 's/^ClusterName += (.*)$/\1/p')
assert_eq "{\"v\":1,\"event\":\"step\",\"job\":\"$job\",\"step\":\"0\",\"ranks\":3,\"nodes\":\"n[1-3]\",\"run_id\":\"$cluster-$job-0\"}" "${lines[0]}" \
    "the step comes first, with its run id"
sorted() { printf '%s\n' "$@" | sort; }
assert_eq "$(sorted '{"v":1,"event":"registered","rank":0,"role":"ps","index":0,"host":"n1"}' \
    '{"v":1,"event":"registered","rank":1,"role":"worker","index":0,"host":"n2"}' \
    '{"v":1,"event":"registered","rank":2,"role":"worker","index":1,"host":"n3"}' \
    '{"v":1,"event":"started","rank":0,"role":"ps","index":0,"host":"n1","restart":0}' \
    '{"v":1,"event":"started","rank":1,"role":"worker","index":0,"host":"n2","restart":0}' \
    '{"v":1,"event":"started","rank":2,"role":"worker","index":1,"host":"n3","restart":0}')" \
    "$(sorted "${lines[@]:1:6}")" "each rank registered and started"$'\n'"$story"
assert_eq '{"v":1,"event":"exited","rank":2,"role":"worker","index":1,"host":"n3","status":1}' "${lines[7]}" \
    "then the failure"$'\n'"$story"
assert_eq '{"v":1,"event":"startup","rank":2,"role":"worker","index":1,"host":"n3","task":T,"up":T,"registered":T,"started":T}' \
    "${lines[8]}" "with its launcher's start-up (no exchange, no progress reported)"$'\n'"$story"
assert_eq '{"v":1,"event":"verdict","verdict":"aborted","status":1,"cause":"trainer","why":"rank 2 (worker:1) on n3 exited with status 1"}' \
    "${lines[9]}" "then the verdict naming it"$'\n'"$story"
# The verdict stopped the ps and the other worker (SIGTERM); their launchers report those exits
# before they leave, so both are recorded, in either order.
assert_eq "$(sorted '{"v":1,"event":"exited","rank":0,"role":"ps","index":0,"host":"n1","signal":15}' \
    '{"v":1,"event":"exited","rank":1,"role":"worker","index":0,"host":"n2","signal":15}' \
    '{"v":1,"event":"startup","rank":0,"role":"ps","index":0,"host":"n1","task":T,"up":T,"registered":T,"started":T}' \
    '{"v":1,"event":"startup","rank":1,"role":"worker","index":0,"host":"n2","task":T,"up":T,"registered":T,"started":T}')" \
    "$(sorted "${lines[@]:10}")" "the stopped trainers' exits follow"$'\n'"$story"

# The timeline: one line per event after its header, times from the step's start.
rc=0
timeline=$("$E2E_TFSLURM" events "$events" 2>&1) || rc=$?
assert_eq 0 "$rc" "tfslurm events reads the file"$'\n'"$timeline"
assert_eq 15 "$(wc -l <<<"$timeline")" "a header and fourteen lines"$'\n'"$timeline"
assert_eq 1 "$(grep -cE '^ +\+[0-9]+\.[0-9]{3} s  verdict: aborted, status 1: rank 2 \(worker:1\) on n3 exited with status 1$' <<<"$timeline")" \
    "the timeline's verdict line"$'\n'"$timeline"
assert_eq 1 "$(grep -cE '^ +\+0\.000 s  step '"$job"'\.0: 3 ranks on n\[1-3\] \(run '"$cluster-$job"'-0\)$' <<<"$timeline")" \
    "the timeline starts with the step"$'\n'"$timeline"
assert_eq 1 "$(grep -cE '^ +\+[0-9]+\.[0-9]{3} s  rank 2 \(worker:1\) on n3: start-up: launcher up \+[0-9.]+ s, registered \+[0-9.]+ s, trainer started \+[0-9.]+ s$' <<<"$timeline")" \
    "the timeline tells rank 2's start-up"$'\n'"$timeline"
assert_eq "$(cat "$events")" "$("$E2E_TFSLURM" events --json "$events")" "--json passes the file through"

# A slowed node: every trainer writes its step into its progress file at once, but n2's after 3 s.
slow=$dir/slow.events
# shellcheck disable=SC2016 # expanded by the trainers' shell
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --events "$slow" -- \
    sh -c 'if [ "$SLURMD_NODENAME" = n2 ]; then sleep 3; fi; echo 40 >"$TFSLURM_PROGRESS_FILE"' \
    2>&1) || fail "the slowed step failed"$'\n'"$out"
assert_eq 3 "$(grep -c '"event":"startup".*"progress":"[^"]*","progress_step":40}' "$slow")" \
    "each rank's first progress and step are recorded"$'\n'"$(cat "$slow")"
rc=0
report=$("$E2E_TFSLURM" events --startup "$slow" 2>&1) || rc=$?
assert_eq 0 "$rc" "tfslurm events --startup reads the record"$'\n'"$report"
slow_job=$(sed -nE '1s/.*"job":"([0-9]+)".*/\1/p' "$slow")
# Durations vary: each becomes D; who is slowest is the point (a node's own phases take a few
# milliseconds, n2's first progress 3 s).
assert_eq "start-up of step $slow_job.0: 3 of 3 ranks reported, on n[1-3]
phase                    median       p90       max  slowest
first progress D D D  rank 1 (worker:1) on n2
slowest nodes to first progress: n2 D,
slowest: rank 1 (worker:1) on n2, D from the step's first task to first progress; its first progress took D (the other ranks' median: D)" \
    "$(sed -E 's/ +-?[0-9]+\.[0-9]{3} s/ D/g; /^(task started|launcher up|registered|trainer started) /d; s/(slowest nodes to first progress: n2 D,).*/\1/' <<<"$report")" \
    "n2 is named, with the phase it was slow in"$'\n'"$report"
slow_ms=$(sed -nE 's/^first progress +[0-9.]+ s +[0-9.]+ s +([0-9]+)\.([0-9]{3}) s .*/\1\2/p' <<<"$report")
# (A file's time is the kernel's coarse clock, a few milliseconds behind the launcher's.)
((10#$slow_ms >= 2900)) || fail "n2's first progress took about 3 s: $report"

no_leftovers 20
e2e_log "PASS"
