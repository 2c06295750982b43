#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A squatter must not stop a job: a process of ANOTHER user (nobody) holds the job's control
# port on rank 0's node (n1) before the job starts, with Debian's /usr/bin/python3
# (hostile_client.py squat). Rank 0's coordinator listens on a fallback port; rank 1's launcher
# on n2 meets the squatter first and must move on to the next candidate whatever it answers:
#   silent   listens and never accepts (the connection completes in its backlog);
#   old      sends the challenge of protocol version 3 (a coordinator of an older tfslurm);
#   garbage  sends an SSH banner.
#   forward  passes rank 1's bytes on to the coordinator's fallback port (a man in the middle
#            that the old proofs let through) and injects a forged `exit 0` for it.
# Each job ends 0, names the squatter once in a warning (a speaking one) and prints no error;
# the forwarded job ends with its true status, 3 (rank 1's trainer), whatever was injected.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
hdir=$(hostile_client_dir "$dir" squatter)

# squat ANSWER BASE WHY: a 2-node job with --port-base BASE (control port BASE + 1 on n1, held by
# a squatter answering ANSWER); WHY is the reason rank 1's warning must give ('' for none).
squat() {
    local answer=$1 base=$2 why=$3 control=$(($2 + 1)) rc=0 out job
    rm -f -- "$hdir/ready" "$hdir/stop"
    hostile_client "$hdir" n1 140 squat 0.0.0.0 "$control" "$answer" "$hdir/stop" "$hdir/ready" \
        >"$dir/$answer.squatter" 2>&1 &
    local squatter_pid=$!
    on_exit "touch '$hdir/stop'; kill $squatter_pid 2>/dev/null || true"
    wait_for_lines "squatting $answer" 1 30 "$hdir/ready"
    timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=1 -o "$dir/$answer.out" "$E2E_TFSLURM" run \
        --auth munge --port-base "$base" -- "$E2E_TRAINER" --work-ms 200 \
        >"$dir/$answer.srun" 2>&1 || rc=$?
    touch "$hdir/stop"
    wait "$squatter_pid" || fail "the $answer squatter failed: $(cat -- "$dir/$answer.squatter")"
    out=$(cat -- "$dir/$answer.out" "$dir/$answer.srun")
    assert_eq 0 "$rc" "the job with a $answer squatter on its control port ends 0"$'\n'"$out"
    assert_eq 2 "$(grep -c 'exiting with status 0' <<<"$out")" "both trainers ran"$'\n'"$out"
    assert_eq 0 "$(grep -c '^tfslurm: error' <<<"$out" || true)" "no error"$'\n'"$out"
    [[ $out =~ tfslurm:\ warning:\ coordinator:\ cannot\ listen\ on\ 0\.0\.0\.0:$control\ \(Address\ already\ in\ use\):\ listening\ on\ fallback\ port\ 32[0-7][0-9][0-9]\ \(1\ of\ 7\) ]] ||
        fail "rank 0's coordinator moved to a fallback port"$'\n'"$out"
    job=$(grep -o -m1 "job [0-9]*'s coordinator" <<<"$out" | grep -o '[0-9]*' || true)
    if [[ -n $why ]]; then
        assert_eq "tfslurm: warning: rank 1 (worker:1): n1:$control did not prove that it is job $job's coordinator: $why; trying the next control port" \
            "$(grep '^tfslurm: warning: rank 1' <<<"$out")" "rank 1 names the $answer squatter once"$'\n'"$out"
        [[ $(cat -- "$dir/$answer.squatter") =~ ^answered\ [1-9][0-9]*$ ]] ||
            fail "the $answer squatter answered no connection: $(cat -- "$dir/$answer.squatter")"
    else
        assert_eq 0 "$(grep -c '^tfslurm: warning: rank 1' <<<"$out" || true)" \
            "a silent squatter is passed over quietly"$'\n'"$out"
    fi
    e2e_log "$answer squatter on n1:$control: the job ended 0"
}

squat silent 23600 ''
# shellcheck disable=SC2016 # literal text of the warning
squat old 23610 'protocol: protocol version 3 (this tfslurm speaks version 7): "{\"nonce\":\"'"$(printf 'ab%.0s' {1..32})"'\",\"type\":\"challenge\",\"v\":3}"'
squat garbage 23620 'protocol: frame of 1397966893 bytes exceeds the 65536-byte limit: "SSH-"'

# forward BASE: the squatter holds the control port (BASE + 1) on n1 and, once rank 0's coordinator
# listens on its fallback port, passes rank 1's connection on to it (rank 1 starts its launcher
# only then) and injects a forged `exit 0` right after rank 1's hello. Rank 1's trainer exits 3.
# The proofs bind the endpoint dialled, so the coordinator refuses the passed-on hello (and the
# injected frame with that unauthenticated connection); rank 1 goes on to the fallback port
# itself, and the step ends with its true status.
forward_squat() {
    local base=$1 control=$(($1 + 1)) rc=0 out job fallback late
    rm -f -- "$hdir/ready" "$hdir/stop" "$hdir/target"
    hostile_client "$hdir" n1 140 squat 0.0.0.0 "$control" forward "$hdir/stop" "$hdir/ready" \
        "$hdir/target" >"$dir/forward.squatter" 2>&1 &
    local squatter_pid=$!
    on_exit "touch '$hdir/stop'; kill $squatter_pid 2>/dev/null || true"
    wait_for_lines "squatting forward" 1 30 "$hdir/ready"
    # shellcheck disable=SC2016 # expanded by the task's shell
    late='if [[ $SLURM_PROCID == 1 ]]; then
    for ((i = 0; i < 600; i++)); do [[ -e $0/target ]] && break; sleep 0.1; done
fi
exec "$@"'
    timeout -k 5 120 srun -N2 -w n1,n2 --ntasks-per-node=1 -o "$dir/forward.out" bash -c "$late" "$hdir" \
        "$E2E_TFSLURM" run --auth munge --port-base "$base" -- "$E2E_TRAINER" --work-ms 200 \
        --on rank=1 --exit-code 3 >"$dir/forward.srun" 2>&1 &
    local srun_pid=$!
    on_exit "kill $srun_pid 2>/dev/null || true"
    wait_for_lines "listening on fallback port" 1 60 "$dir/forward.out"
    fallback=$(grep -o 'listening on fallback port [0-9]*' "$dir/forward.out" | grep -o '[0-9]*$')
    printf '127.0.0.1 %s\n' "$fallback" >"$hdir/target.tmp"
    mv -- "$hdir/target.tmp" "$hdir/target"
    wait "$srun_pid" || rc=$?
    touch "$hdir/stop"
    wait "$squatter_pid" || fail "the forward squatter failed: $(cat -- "$dir/forward.squatter")"
    out=$(cat -- "$dir/forward.out" "$dir/forward.srun")
    assert_eq 3 "$rc" "the forwarded job ends with its true status"$'\n'"$out"
    [[ $(cat -- "$dir/forward.squatter") =~ ^answered\ [1-9][0-9]*$ ]] ||
        fail "the forward squatter passed on no connection: $(cat -- "$dir/forward.squatter")"
    job=$(grep -o -m1 "job [0-9]*'s coordinator" <<<"$out" | grep -o '[0-9]*' || true)
    assert_eq "tfslurm: warning: rank 1 (worker:1): n1:$control did not prove that it is job $job's coordinator: it rejected rank 1 (worker:1): munge credential payload does not match the job, step, rank, challenge and endpoint; trying the next control port" \
        "$(grep '^tfslurm: warning: rank 1' <<<"$out")" "rank 1 names the refusal once"$'\n'"$out"
    assert_contains "$out" "tfslurm: warning: coordinator: rejected rank 1 from 127.0.0.1:" \
        "the coordinator refused the passed-on hello"
    assert_eq "tfslurm: error: aborting: rank 1 (worker:1) on n2 exited with status 3" \
        "$(grep '^tfslurm: error' <<<"$out")" "the true failure, once"$'\n'"$out"
    e2e_log "forward squatter on n1:$control with a forged exit 0: the job ended 3, its true status"
}
forward_squat 23630

no_leftovers 20
e2e_log "PASS"
