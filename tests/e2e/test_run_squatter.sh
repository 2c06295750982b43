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
# Each job ends 0, names the squatter once in a warning (a speaking one) and prints no error.
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
    timeout -k 5 120 srun -N2 --ntasks-per-node=1 -o "$dir/$answer.out" "$E2E_TFSLURM" run \
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
squat old 23610 'protocol: unsupported protocol version (expected "v":5): "{\"nonce\":\"'"$(printf 'ab%.0s' {1..32})"'\",\"type\":\"challenge\",\"v\":3}"'
squat garbage 23620 'protocol: frame of 1397966893 bytes exceeds the 65536-byte limit: "SSH-"'

no_leftovers 20
e2e_log "PASS"
