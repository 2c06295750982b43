#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tfslurm as an ordinary user, the way it runs on a production cluster, with the binary copied
# out of the build tree (it needs only glibc):
#   - `tfslurm env` in a step of user nobody: every task runs as that user and gets its TF_CONFIG;
#   - `srun --tfslurm` of that user: srun (as the user) and slurmstepd load the SPANK plugin;
#   - `tfslurm run` of user nobody with MUNGE authentication ends the step with status 0;
#   - while that step runs, before rank 1's own launcher starts, a launcher of another user
#     (root) that replays rank 1's exact Slurm environment on rank 1's node is rejected by the
#     coordinator (the MUNGE credential names its uid); once rank 1 registered, so is a second
#     launcher of the same user for it; neither disturbs the job.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

user=nobody
uid=$(id -u "$user") || fail "user $user does not exist"
gid=$(id -g "$user")

# A directory the user owns, reachable through the test's private temporary directory.
chmod 711 "$E2E_TMPDIR"
dir=$(make_tmpdir)
mkdir "$dir/bin"
cp -- "$E2E_TFSLURM" "$E2E_TRAINER" "${E2E_SPANK_PLUGIN:?the SPANK plugin is not built}" "$dir/bin/"
chown -R "$user:" "$dir"
chmod -R go+rX "$dir"
tfslurm=$dir/bin/${E2E_TFSLURM##*/}
trainer=$dir/bin/${E2E_TRAINER##*/}
cd "$dir"

# "${as_user[@]}" CMD...: CMD as the user, with the cluster's configuration (which also names
# munged's socket).
as_user=("${E2E_TC_EXEC[@]}" runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF")

# --- tfslurm env --------------------------------------------------------------------------------
# shellcheck disable=SC2016 # expanded by the task's shell
out=$(run_bounded 60 "${as_user[@]}" srun -N3 --ntasks-per-node=1 bash -c \
    'printf "%s %s %s %s\n" "$SLURM_PROCID" "$(id -u)" "$(hostname)" "$("$0" env --only tf --format env | sed -n 1p)"' \
    "$tfslurm" 2>&1) || fail "srun as $user failed (status $?):"$'\n'"$out"
port=$(sed -n 's/.*"n1:\([0-9]*\)".*/\1/p' <<<"$out" | sed -n 1p)
[[ -n $port ]] || fail "no port for n1 in:"$'\n'"$out"
cluster="{\"cluster\":{\"worker\":[\"n1:$port\",\"n2:$port\",\"n3:$port\"]}"
assert_eq "0 $uid n1 TF_CONFIG=$cluster,\"task\":{\"type\":\"worker\",\"index\":0}}
1 $uid n2 TF_CONFIG=$cluster,\"task\":{\"type\":\"worker\",\"index\":1}}
2 $uid n3 TF_CONFIG=$cluster,\"task\":{\"type\":\"worker\",\"index\":2}}" "$(sort <<<"$out")" \
    "tasks of $user: uid, host and TF_CONFIG"
e2e_log "env as $user (uid $uid): ok"

# --- srun --tfslurm ------------------------------------------------------------------------------
E2E_SPANK_PLUGIN=$dir/bin/${E2E_SPANK_PLUGIN##*/}
use_spank_plugin
spank_install enabled=option
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 "${as_user[@]}" srun -N3 --ntasks-per-node=1 --tfslurm=ps=1 bash -c \
    'echo "$SLURM_PROCID $(id -u) $TFSLURM_ROLE $TFSLURM_TASK_TYPE:$TFSLURM_TASK_INDEX"'
assert_eq "0 $uid ps ps:0
1 $uid worker worker:0
2 $uid worker worker:1" "$(sort -n <<<"$E2E_OUTPUT")" "srun --tfslurm=ps=1 as $user"
spank_uninstall
e2e_log "srun --tfslurm as $user: ok"

# --- tfslurm run, and launchers that do not belong to it ---------------------------------------
# Rank 1's task saves its SLURM_* variables and waits for the file "go1" before it starts its
# launcher. Each task's trainer wrapper saves the coordinator's address and notes that it
# started (after its launcher has registered), then waits for the file "go".
# shellcheck disable=SC2016 # expanded by the task's shell
rank1_late='if [[ $SLURM_PROCID == 1 ]]; then
    sleep 3; env -0 | grep -z "^SLURM" >"$0/env-1.tmp" && mv "$0/env-1.tmp" "$0/env-1"
    for ((i = 0; i < 600; i++)); do [[ -e $0/go1 ]] && break; sleep 0.1; done
fi
exec "$@"'
# shellcheck disable=SC2016 # expanded by the task's shell
wrapper='printf "%s\n" "$TFSLURM_CONTROL" >"$0/control"
touch "$0/started-$SLURM_PROCID"
for ((i = 0; i < 600; i++)); do [[ -e $0/go ]] && break; sleep 0.1; done
exec "$@"'
"${as_user[@]}" timeout -k 5 120 srun -N3 --ntasks-per-node=1 -o "$dir/task-%t.out" \
    bash -c "$rank1_late" "$dir" "$tfslurm" run --ps 1 --auth munge --grace 5 -- \
    bash -c "$wrapper" "$dir" "$trainer" --work-ms 200 >"$dir/srun.out" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"
# wait_files WHAT FILE...: until all FILEs exist (at most 60 s); WHAT names them in the failure.
wait_files() {
    local what=$1 i file all
    shift
    for ((i = 0; i < 600; i++)); do
        all=1
        for file in "$@"; do
            [[ -e $file ]] || all=0
        done
        ((all)) && return 0
        sleep 0.1
    done
    fail "$what within 60 s:"$'\n'"$(cat "$dir"/*.out)"
}
# wait_started RANK...: until those ranks' trainers started.
wait_started() {
    local rank files=()
    for rank in "$@"; do files+=("$dir/started-$rank"); done
    wait_files "the trainers of ranks $* did not start" "${files[@]}"
}
wait_started 0 2
# Nothing orders rank 1's task after the others' trainers: slurmstepd on n2 may start it later.
wait_files "rank 1's task did not save its environment" "$dir/env-1"
mapfile -d '' rank1 <"$dir/env-1"
control=$(<"$dir/control")

# impostor USER: a launcher of USER on n2 with rank 1's Slurm environment; prints its output.
impostor() {
    local rc=0
    timeout -k 5 60 "$E2E_TEST_CLUSTER" node n2 runuser -u "$1" -- env -i PATH="$PATH" "${rank1[@]}" \
        "$tfslurm" run --ps 1 --auth munge --grace 5 --connect-timeout 2 -- "$trainer" 2>&1 || rc=$?
    printf 'status %s\n' "$rc"
}
# A reject proves nothing (any process could send one): the impostor keeps looking for a
# coordinator that proves itself until its connect timeout, then names the reject.
job=$(tr '\0' '\n' <"$dir/env-1" | sed -n 's/^SLURM_JOB_ID=//p')
assert_eq "tfslurm: warning: rank 1 (worker:0): $control did not prove that it is job $job's coordinator: it rejected rank 1 (worker:0): munge credential of another user, which munged decodes for that user only (Unauthorized credential for client UID=$uid GID=$gid); trying the next control port
tfslurm: error: coordinator: $control rejected rank 1 (worker:0): munge credential of another user, which munged decodes for that user only (Unauthorized credential for client UID=$uid GID=$gid)
tfslurm: hint: every task must run 'tfslurm run' with the same options, the same TFSLURM_SECRET and as the same user
status 7" "$(impostor root)" "a launcher of root is rejected"
touch "$dir/go1"
wait_started 1
assert_eq "tfslurm: warning: rank 1 (worker:0): $control did not prove that it is job $job's coordinator: it rejected rank 1 (worker:0): rank 1 is already registered; trying the next control port
tfslurm: error: coordinator: $control rejected rank 1 (worker:0): rank 1 is already registered
tfslurm: hint: every task must run 'tfslurm run' with the same options, the same TFSLURM_SECRET and as the same user
status 7" "$(impostor "$user")" "a second launcher of $user for rank 1 is rejected"
e2e_log "impostors rejected: root, and $user for a rank already registered"

touch "$dir/go"
rc=0
wait "$srun_pid" || rc=$?
out=$(cat "$dir"/task-{0,1,2}.out "$dir/srun.out")
assert_eq 0 "$rc" "srun status of the job of $user"$'\n'"$out"
assert_contains "$out" "tfslurm: warning: coordinator: rejected rank 1 from 10.77.0.12:" \
    "the coordinator reports the rejected connection"
assert_contains "$out" "munge credential of another user, which munged decodes for that user only (Unauthorized credential for client UID=$uid GID=$gid)" "the coordinator names the uid"
assert_eq 2 "$(grep -c 'exiting with status 0' <<<"$out")" "both workers finished"$'\n'"$out"
assert_contains "$out" "tfslurm: info: rank 0 (ps:0): the work is done: stopping the trainer" \
    "the ps was stopped"
e2e_log "run as $user: status 0"

no_leftovers 20
e2e_log "PASS"
