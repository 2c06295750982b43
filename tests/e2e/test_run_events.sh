#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The record of a failed step (--events FILE): rank 0's launcher writes every event of the step
# as it happens, one version-1 JSON object per line, and `tfslurm events FILE` tells it as a
# timeline. A worker on n3 exits 1 in a 1 ps + 2 worker step on three nodes: the file holds the
# step, three registrations and starts, the failure, the verdict naming it and the exits of the
# two trainers the verdict stopped (SIGTERM), in an order that only the registrations and the
# stopped exits may vary.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
events=$dir/step.events
rc=0
out=$(run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run --ps 1 --auth munge --grace 5 \
    --events "$events" -- "$E2E_TRAINER" --work-ms 60000 --on worker:1 --work-ms 500 --exit-code 1 \
    2>&1) || rc=$?
assert_eq 1 "$rc" "srun reports the failing worker's status"$'\n'"$out"
[[ -s $events ]] || fail "no event file at $events"$'\n'"$out"
job=$(sed -nE '1s/.*"job":"([0-9]+)".*/\1/p' "$events")
[[ -n $job ]] || fail "the first line is not the step: $(head -1 "$events")"

# Every line is version 1 with a time of the documented form; then compare without the times.
assert_eq 0 "$(grep -cvE '^\{"v":1,"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z",' "$events")" \
    "every line starts with the version and the time"$'\n'"$(cat "$events")"
mapfile -t lines < <(sed -E 's/"time":"[^"]*",//' "$events")
story=$(printf '%s\n' "${lines[@]}")
assert_eq 11 "${#lines[@]}" "eleven events"$'\n'"$story"
assert_eq "{\"v\":1,\"event\":\"step\",\"job\":\"$job\",\"step\":\"0\",\"ranks\":3,\"nodes\":\"n[1-3]\"}" "${lines[0]}" \
    "the step comes first"
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
assert_eq '{"v":1,"event":"verdict","verdict":"aborted","status":1,"cause":"trainer","why":"rank 2 (worker:1) on n3 exited with status 1"}' \
    "${lines[8]}" "then the verdict naming it"$'\n'"$story"
# The verdict stopped the ps and the other worker (SIGTERM); their launchers report those exits
# before they leave, so both are recorded, in either order.
assert_eq "$(sorted '{"v":1,"event":"exited","rank":0,"role":"ps","index":0,"host":"n1","signal":15}' \
    '{"v":1,"event":"exited","rank":1,"role":"worker","index":0,"host":"n2","signal":15}')" \
    "$(sorted "${lines[@]:9}")" "the stopped trainers' exits follow"$'\n'"$story"

# The timeline: one line per event after its header, times from the step's start.
rc=0
timeline=$("$E2E_TFSLURM" events "$events" 2>&1) || rc=$?
assert_eq 0 "$rc" "tfslurm events reads the file"$'\n'"$timeline"
assert_eq 12 "$(wc -l <<<"$timeline")" "a header and eleven lines"$'\n'"$timeline"
assert_eq 1 "$(grep -cE '^ +\+[0-9]+\.[0-9]{3} s  verdict: aborted, status 1: rank 2 \(worker:1\) on n3 exited with status 1$' <<<"$timeline")" \
    "the timeline's verdict line"$'\n'"$timeline"
assert_eq 1 "$(grep -cE '^ +\+0\.000 s  step '"$job"'\.0: 3 ranks on n\[1-3\]$' <<<"$timeline")" \
    "the timeline starts with the step"$'\n'"$timeline"
assert_eq "$(cat "$events")" "$("$E2E_TFSLURM" events --json "$events")" "--json passes the file through"

no_leftovers 20
e2e_log "PASS"
