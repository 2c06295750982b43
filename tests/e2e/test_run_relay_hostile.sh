#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The node relay against ANOTHER user (nobody) on the node, with Debian's /usr/bin/python3
# (hostile_client.py), each under a timeout. A 2-node step of 2 tasks per node: rank 2 leads n2
# and relays for rank 3 on the abstract Unix socket @tfslurm-<uid>/relay-<job>.<step>-2.
#   (a) squat: nobody binds that name on n2 before rank 2's launcher starts (the job id is
#       public). Rank 3 finds nobody's process there (SO_PEERCRED) and fails at once, rank 2
#       cannot listen and fails at once, each with one line naming nobody's uid and pid; no
#       trainer of n2 starts, and nothing waits for the connect timeout.
#   (b) knock: nobody connects to the live relay of a running step: closed before a byte
#       (SO_PEERCRED), one warning in the job's log, and the job ends 0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
hdir=$(hostile_client_dir "$dir" relay)
uid=$(id -u)
nobody=$(id -u nobody)

# --- (a) another user holds the relay's name first ---------------------------------------------
# Rank 0 notes the job id; rank 2 starts its launcher only once the squatter is in place.
# shellcheck disable=SC2016 # expanded by the task's shell
late='if [[ $SLURM_PROCID == 0 ]]; then
    printf "%s\n" "$SLURM_JOB_ID" >"$0/job.tmp" && mv -- "$0/job.tmp" "$0/job"
fi
if [[ $SLURM_PROCID == 2 ]]; then
    for ((i = 0; i < 600; i++)); do [[ -s $0/ready ]] && break; sleep 0.1; done
fi
exec "$@"'
timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=2 -o "$dir/squat-%t.out" bash -c "$late" "$hdir" \
    "$E2E_TFSLURM" run --auth munge --port-base 23700 -- "$E2E_TRAINER" --work-ms 200 \
    >"$dir/squat.srun" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
wait_for_lines . 1 60 "$hdir/job"
job=$(<"$hdir/job")
name="@tfslurm-$uid/relay-$job.0-2"
hostile_client "$hdir" n2 100 relay-squat "$name" "$hdir/stop" "$hdir/ready" \
    >"$dir/squat.client" 2>&1 &
squatter_pid=$!
on_exit "touch '$hdir/stop'; kill $squatter_pid 2>/dev/null || true"
wait_for_lines squatting 1 30 "$hdir/ready"
pid=$(awk '{print $2}' "$hdir/ready")
rc=0
wait "$srun_pid" || rc=$?
touch "$hdir/stop"
wait "$squatter_pid" || fail "the relay squatter failed: $(cat -- "$dir/squat.client")"
((rc != 0)) || fail "the step with a squatted relay ended 0:"$'\n'"$(cat -- "$dir"/squat*)"
holder="is held by uid $nobody (pid $pid), not by this job's user (uid $uid)"
hint='tfslurm: hint: '"another process on this node took the relay's name; \`ss -xlp | grep tfslurm\` shows it"
assert_eq "tfslurm: error: relay: \"$name\" $holder
$hint" "$(grep '^tfslurm: \(error\|hint\)' "$dir/squat-2.out")" \
    "rank 2 cannot listen, naming the holder"$'\n'"$(cat -- "$dir/squat-2.out")"
assert_eq "tfslurm: error: relay: rank 3 (worker:3): rank 2's relay \"$name\" $holder
$hint" "$(grep '^tfslurm: \(error\|hint\)' "$dir/squat-3.out")" \
    "rank 3 refuses the squatter's socket"$'\n'"$(cat -- "$dir/squat-3.out")"
assert_eq 0 "$(cat -- "$dir/squat-2.out" "$dir/squat-3.out" | grep -c 'tf_trainer\[' || true)" \
    "no trainer of n2 started"
assert_eq 0 "$(cat -- "$dir"/squat-*.out | grep -c 'connect timeout\|within 60 s' || true)" \
    "nothing waited for the connect timeout"
e2e_log "relay name squatted by nobody: ranks 2 and 3 failed at once, naming uid $nobody"

# --- (b) another user knocks on a live relay ---------------------------------------------------
# Every trainer notes that it started, then waits for "go".
# shellcheck disable=SC2016 # expanded by the task's shell
wait_go='if [[ $SLURM_PROCID == 0 ]]; then
    printf "%s\n" "$SLURM_JOB_ID" >"$0/job2.tmp" && mv -- "$0/job2.tmp" "$0/job2"
fi
touch "$0/started-$SLURM_PROCID"
for ((i = 0; i < 600; i++)); do [[ -e $0/go ]] && break; sleep 0.1; done
exec "$@"'
timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=2 -o "$dir/knock.out" "$E2E_TFSLURM" run \
    --auth munge --port-base 23710 -- bash -c "$wait_go" "$dir" "$E2E_TRAINER" --work-ms 200 \
    >"$dir/knock.srun" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
for ((i = 0; i < 600; i++)); do
    [[ -e $dir/started-2 && -e $dir/started-3 && -s $dir/job2 ]] && break
    sleep 0.1
done
[[ -e $dir/started-3 ]] || fail "rank 3 did not start within 60 s:"$'\n'"$(cat -- "$dir"/knock.*)"
job=$(<"$dir/job2")
name="@tfslurm-$uid/relay-$job.0-2"
assert_eq "closed unread" "$(hostile_client "$hdir" n2 30 relay-knock "$name" 2>&1)" \
    "nobody's connection to the relay"
touch "$dir/go"
rc=0
wait "$srun_pid" || rc=$?
out=$(cat -- "$dir/knock.out" "$dir/knock.srun")
assert_eq 0 "$rc" "the job ends 0"$'\n'"$out"
[[ $(grep '^tfslurm: warning: relay' <<<"$out") =~ ^tfslurm:\ warning:\ relay:\ refused\ a\ connection\ to\ $name\ from\ uid\ $nobody\ \(pid\ [0-9]+\):\ not\ this\ job\'s\ user\ \(uid\ $uid\)$ ]] ||
    fail "one warning names nobody's connection"$'\n'"$out"
assert_eq 4 "$(grep -c 'exiting with status 0' <<<"$out")" "every trainer ran"$'\n'"$out"
e2e_log "nobody's connection to a live relay: closed unread, the job ended 0"

no_leftovers 20
e2e_log "PASS"
