#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Nothing a trainer starts outlives its launcher: a trainer that forks a child and starts a
# daemon (setsid, double fork, stdio closed) runs under its launcher's keeper (a child
# subreaper; the default) or, with --contain, in a PID namespace of its own; in both modes the
# child and the daemon end with it, when the trainer exits and when its launcher is killed by
# SIGKILL (and runs no code). srun ends by itself within its bound, and no process carrying the
# test's marker is left on any node, nor the killed launcher's progress file. Without
# containment the daemon outlives the step and srun waits for it. Two trainers on one node see
# distinct real pids by default, pid 2 each with --contain.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

dir=$(make_tmpdir)
marker=tfslurm-containment-$$
trainer=$dir/trainer.sh
# trainer.sh MARKER EXIT: a child and a daemon that loop forever (each carries MARKER in its
# command line), then exit EXIT, or loop forever when EXIT is "loop".
cat >"$trainer" <<'SCRIPT'
#!/bin/bash
loop='while :; do sleep 1; done'
bash -c "$loop" "$1-child" &
setsid bash -c 'bash -c "$1" "$2" </dev/null >/dev/null 2>&1 &' _ "$loop" "$1-daemon"
echo "trainer $SLURM_PROCID started"
[[ $2 == loop ]] || exit "$2"
while :; do sleep 1; done
SCRIPT
chmod 755 "$trainer"

# marked: the pids of the trainers' children and daemons: the processes whose command line holds
# "<marker>-" (on any node: the node namespaces share the host's PID namespace).
marked() {
    local pid
    for pid in /proc/[0-9]*; do
        tr '\0' ' ' <"$pid/cmdline" 2>/dev/null | grep -F -- "$marker-" >/dev/null && printf '%s\n' "${pid#/proc/}"
    done
    return 0
}
# assert_none_marked WHAT: within 20 s (they usually end at once), no marked process is left.
assert_none_marked() {
    local i
    for ((i = 0; i < 200; i++)); do
        [[ -z $(marked) ]] && return 0
        sleep 0.1
    done
    fail "$1: processes left: $(marked | tr '\n' ' ')"
}
on_exit "kill -KILL \$(marked) 2>/dev/null || true"

# contained MODE...: parts 1 and 2 with the launcher options MODE (none: the keeper).
contained() {
    local mode=("$@") rc out victims i line
    # 1. The trainer exits 3: its child and its daemon end with it.
    rc=0
    out=$(timeout -k 5 60 srun -N1 "$E2E_TFSLURM" run "${mode[@]}" --auth munge -- "$trainer" "$marker" 3 2>&1) || rc=$?
    assert_eq 3 "$rc" "srun ends with the trainer's status"$'\n'"$out"
    assert_contains "$out" "trainer 0 started" "the trainer ran"
    assert_none_marked "after the trainer exited"

    # 2. The launcher of n3 is killed by SIGKILL: its trainer, child and daemon end with it at once.
    # Slurm's proctrack kills what is left of a step when the step ends, so each launcher runs under
    # a wrapper that keeps its task alive until the test releases it: what ends before that ended
    # because the launcher died, not because Slurm cleaned up.
    # shellcheck disable=SC2016 # expanded by the task's bash
    wrapper='"$@"; rc=$?; touch "$DIR/gone-$SLURM_PROCID"
    while [ ! -e "$DIR/release" ]; do sleep 0.1; done; exit "$rc"'
    # The step is not cancelled through Slurm when the launcher is lost (TFSLURM_LIBSLURM names no
    # library, and the scancel that rank 0's launcher then runs instead fails:
    # test_run_node_lost.sh and test_run_node_lost_scancel.sh test the cancel): containment alone
    # must end n3's processes.
    mkdir -p "$dir/bin"
    printf '#!/bin/sh\necho "scancel: refused by the test" >&2\nexit 1\n' >"$dir/bin/scancel"
    chmod +x "$dir/bin/scancel"
    DIR=$dir TFSLURM_LIBSLURM=/nonexistent/libslurm.so PATH=$dir/bin:$PATH timeout -k 5 60 srun -N3 --ntasks-per-node=1 -o "$dir/task-%t.out" bash -c "$wrapper" \
        wrapper "$E2E_TFSLURM" run "${mode[@]}" --ps 1 --auth munge --grace 5 --heartbeat-timeout 5 \
        -- "$trainer" "$marker" loop >"$dir/srun.out" 2>&1 &
    srun_pid=$!
    on_exit "kill $srun_pid 2>/dev/null || true"
    on_exit "touch '$dir/release'"
    tasks=("$dir"/task-{0,1,2}.out)
    wait_for_lines 'started' 3 30 "${tasks[@]}"
    # Three trainers, each with a child and a daemon.
    (($(marked | wc -l) >= 6)) || fail "expected the children and daemons running: $(marked | tr '\n' ' ')"

    mapfile -t victims < <(launcher_pids n3)
    ((${#victims[@]} == 1)) || fail "expected one launcher on n3, found: ${victims[*]:-none}"
    mapfile -t progress < <(progress_files n3)
    ((${#progress[@]} == 1)) || fail "expected one progress file on n3, found: ${progress[*]:-none}"
    [[ -e ${progress[0]} ]] || fail "no progress file ${progress[0]}"
    kill -KILL "${victims[0]}"
    e2e_log "killed the launcher of n3 (pid ${victims[0]})"
    for ((i = 0; i < 300; i++)); do
        [[ -e $dir/gone-0 && -e $dir/gone-1 && -e $dir/gone-2 ]] && break
        sleep 0.1
    done
    [[ -e $dir/gone-0 && -e $dir/gone-1 && -e $dir/gone-2 ]] ||
        fail "the launchers did not end: $(cat -- "${tasks[@]}")"
    assert_none_marked "after the launcher of n3 was killed, while every task still runs"
    # The killed launcher could not remove its trainer's progress file: its keeper (with
    # --contain, its supervisor) did.
    [[ ! -e ${progress[0]} ]] || fail "the killed launcher's progress file is left: ${progress[0]}"
    kill -0 "$srun_pid" || fail "the step ended before the test released it"

    touch "$dir/release"
    rc=0
    wait "$srun_pid" || rc=$?
    out=$(cat -- "${tasks[@]}" "$dir/srun.out")
    ((rc != 124)) || fail "srun did not end within its bound"$'\n'"$out"
    assert_eq 137 "$rc" "srun reports the killed launcher's status"$'\n'"$out"
    line="tfslurm: error: aborting: rank 2 (worker:1) on n3 launcher lost (connection closed)"
    assert_eq 1 "$(grep -cF "$line" "$dir/task-0.out")" "rank 0's launcher names the lost launcher"$'\n'"$out"
    no_leftovers 20
    rm -f -- "$dir"/gone-* "$dir/release" "$dir"/task-*.out "$dir/srun.out"
    e2e_log "containment ${mode[*]:-(the keeper)}: nothing left"
}

contained
contained --contain

# 3. Two trainers on one node: each prints its pid as it sees it ($$) and as the host does.
# shellcheck disable=SC2016 # expanded by the trainer's shell
pids='read -r host _ </proc/self/stat; echo "rank $SLURM_PROCID pid $$ host $host"'
out=$(run_bounded 60 srun -N1 --ntasks-per-node=2 "$E2E_TFSLURM" run --auth munge -- bash -c "$pids" 2>&1)
mapfile -t lines < <(grep '^rank ' <<<"$out" | sort)
((${#lines[@]} == 2)) || fail "two trainers' pids expected"$'\n'"$out"
for line in "${lines[@]}"; do
    [[ $line =~ ^rank\ [01]\ pid\ ([0-9]+)\ host\ ([0-9]+)$ ]] || fail "unexpected line: $line"
    assert_eq "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}" "the keeper leaves the trainer its real pid"
done
[[ ${lines[0]#* pid } != "${lines[1]#* pid }" ]] || fail "two trainers share a pid: ${lines[*]}"
out=$(run_bounded 60 srun -N1 --ntasks-per-node=2 "$E2E_TFSLURM" run --contain --auth munge -- bash -c "$pids" 2>&1)
assert_eq 2 "$(grep -cE '^rank [01] pid 2 host [0-9]+$' <<<"$out")" \
    "with --contain each trainer is pid 2 in its namespace"$'\n'"$out"
e2e_log "two trainers on one node: distinct real pids; pid 2 each with --contain"

no_leftovers 20
e2e_log "PASS"
