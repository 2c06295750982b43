#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The one library of helpers for the end-to-end tests (tests/e2e/test_*.sh). Source it first
# thing:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# then declare what the test needs: require_tfslurm (the tfslurm executable), require_trainer
# (`tfslurm run` with the fake trainer and MUNGE), use_spank_plugin (the SPANK plugin in the
# cluster's plugin stack).
#
# On load it exports SLURM_CONF of the running test cluster (scripts/test-cluster, see
# docs/test-cluster.md) and its settings as TC_* variables (TC_NODES, TC_CPUS, TC_GPUS,
# TC_NODE_NAMES="n1 n2 n3", TC_NODELIST="n[1-3]", TC_DIR, TC_SLURM, ...), creates E2E_TMPDIR (removed on
# exit) and fails the test at once if the cluster is not up.
#
# Environment from CTest: E2E_TFSLURM (the tfslurm executable), E2E_SOURCE_DIR,
# E2E_BUILD_DIR, E2E_TEST_CLUSTER (scripts/test-cluster). Set E2E_KEEP_TMP=1 to keep
# E2E_TMPDIR for debugging. No TFSLURM_* variable of the caller's reaches the commands under
# test (tfslurm warns about every one that is not its own, and reads the others as settings):
# the harness's own variables are E2E_*, and a test sets the TFSLURM_* it means per command.
#
# Rules (docs/test-cluster.md): bound every srun/sbatch/salloc and every wait (run_bounded,
# sbatch_wait); pin layouts with --ntasks-per-node; leave nothing behind (no_leftovers).
# fail/assert_* exit the test when called from the test's main shell; inside $(...) they only
# end that subshell.
set -euo pipefail

e2e_lib_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
: "${E2E_SOURCE_DIR:=$(cd -- "$e2e_lib_dir/../.." && pwd)}"
: "${E2E_TEST_CLUSTER:=$E2E_SOURCE_DIR/scripts/test-cluster}"
: "${E2E_BUILD_DIR:=}"
: "${E2E_TFSLURM:=}"
export E2E_SOURCE_DIR E2E_TEST_CLUSTER E2E_BUILD_DIR E2E_TFSLURM
E2E_NAME=$(basename -- "$0" .sh)

# e2e_log MESSAGE: a progress line on stderr.
e2e_log() { printf '%s: %s\n' "$E2E_NAME" "$*" >&2; }

# fail MESSAGE: report a failure and end the test (exit 1). A test that defines e2e_diagnose
# (a function) has it called first, once, its output on stderr: what the failure alone would
# not show (the processes still running, the daemons' lines about the job).
fail() {
    printf '%s: FAIL: %s\n' "$E2E_NAME" "$*" >&2
    if [[ -z ${e2e_diagnosed-} ]] && declare -F e2e_diagnose >/dev/null; then
        e2e_diagnosed=1
        e2e_diagnose >&2 || true
    fi
    if [[ -n ${TC_DIR:-} ]]; then
        printf '%s: cluster logs: %s/log/ (scripts/test-cluster logs)\n' "$E2E_NAME" "$TC_DIR" >&2
    fi
    exit 1
}

# --- cluster -----------------------------------------------------------------------------------

if ! e2e_env_out=$(bash "$E2E_TEST_CLUSTER" env 2>&1); then
    fail "the test cluster is not available: ${e2e_env_out#test-cluster: error: }"
fi
eval "$e2e_env_out"
eval "$(bash "$E2E_TEST_CLUSTER" settings)"
export SLURM_CONF
# TFSLURM_TC_SLURM=<release> asks for a cluster of that Slurm release (the e2e fixture starts
# one): a cluster of another release would test the wrong one. Another release's srun, sbatch,
# scontrol, ... come first in PATH (test-cluster env), so the tests call them as usual.
if [[ -n ${TFSLURM_TC_SLURM:-} && $TFSLURM_TC_SLURM != "$TC_SLURM" ]]; then
    fail "the test cluster runs Slurm $TC_SLURM, not TFSLURM_TC_SLURM=$TFSLURM_TC_SLURM; restart it: $E2E_TEST_CLUSTER down && $E2E_TEST_CLUSTER up --slurm $TFSLURM_TC_SLURM"
fi
# "${E2E_TC_EXEC[@]}" CMD...: CMD where the cluster's release is (nothing for the machine's own;
# `test-cluster exec --` for another one). For a CMD that changes user (runuser) before it calls
# a Slurm client: only root can enter another release's root filesystem.
# shellcheck disable=SC2034 # used by the tests
if [[ -n ${TC_ROOTFS:-} ]]; then E2E_TC_EXEC=("$E2E_TEST_CLUSTER" exec --); else E2E_TC_EXEC=(); fi
# shellcheck disable=SC2206 # TC_NODE_NAMES is a space-separated list of simple names
TC_NODE_ARRAY=($TC_NODE_NAMES)
unset e2e_env_out
# A developer's TFSLURM_PS, the test cluster's TFSLURM_TC_*, TFSLURM_FUZZ_SECONDS: kept for this
# shell (the cluster's settings were read above), given to no command.
while IFS= read -r e2e_name; do
    # shellcheck disable=SC2163 # un-export the variable that e2e_name names
    export -n "$e2e_name"
done < <(compgen -e | grep '^TFSLURM_' || true)
unset e2e_name

# --- temporary files and cleanup ---------------------------------------------------------------

E2E_TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-e2e-$E2E_NAME.XXXXXX")
chmod 755 "$E2E_TMPDIR"
e2e_exit_hooks=()

# on_exit COMMAND: run COMMAND (eval'd) when the test exits, before E2E_TMPDIR is removed.
on_exit() { e2e_exit_hooks+=("$1"); }

e2e_cleanup() {
    local rc=$? hook
    for hook in "${e2e_exit_hooks[@]}"; do
        eval "$hook" || true
    done
    if [[ ${E2E_KEEP_TMP:-0} == 1 ]]; then
        e2e_log "kept $E2E_TMPDIR"
    else
        rm -rf -- "$E2E_TMPDIR"
    fi
    return "$rc"
}
trap e2e_cleanup EXIT

# make_tmpdir: print the path of a new directory inside E2E_TMPDIR (removed on exit; visible
# on every node, which share this machine's file system).
make_tmpdir() { mktemp -d "$E2E_TMPDIR/d.XXXXXX"; }

# --- bounded commands --------------------------------------------------------------------------

# run_bounded SECONDS CMD...: run CMD, killing it after SECONDS (SIGTERM, SIGKILL 5 s later).
# Returns CMD's status, or 124 with a clear message on a timeout.
run_bounded() {
    local secs=$1 rc=0 start=$SECONDS word
    shift
    for word in "$@"; do
        if [[ $word == srun || $word == salloc || $word == sbatch ]]; then
            settle
            break
        fi
    done
    timeout -k 5 "$secs" "$@" || rc=$?
    if ((rc == 124 || (rc == 137 && SECONDS - start >= secs))); then
        e2e_log "TIMEOUT: no result after ${secs} s: $*"
        return 124
    fi
    return "$rc"
}

# settle: wait (at most 30 s) until no job is completing. Slurm gives a job's nodes back one by
# one, as each node's epilog ends, so an allocation made right after another job may get other
# nodes than a test expects (a -N2 step on n2,n3 instead of n1,n2). run_bounded and sbatch_submit
# settle before every srun, salloc and sbatch.
settle() {
    local i
    for ((i = 0; i < 150; i++)); do
        [[ -z $(timeout 10 squeue -h -t CG -o %i 2>/dev/null) ]] && return 0
        sleep 0.2
    done
}

# sbatch_submit ARGS...: submit a batch job (bounded) and print its id.
sbatch_submit() {
    local out
    settle
    out=$(timeout -k 5 30 sbatch --parsable "$@" 2>&1) || fail "sbatch $* failed: $out"
    out=${out%%;*}
    [[ $out =~ ^[0-9]+$ ]] || fail "sbatch $* printed no job id: $out"
    printf '%s\n' "$out"
}

# sbatch_wait JOBID SECONDS: poll scontrol until the job ends and return its exit code
# (128 + signal if it was signalled; 1 if it ended abnormally without either). On a timeout the
# job is cancelled and the status is 124; 125 if its record vanished before it was seen ending.
# E2E_JOB_STATE holds the last state seen (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...).
sbatch_wait() {
    local jid=$1 secs=$2 info code sig i
    E2E_JOB_STATE=
    for ((i = 0; i < secs * 5; i++)); do
        if info=$(timeout 10 scontrol show job -o "$jid" 2>&1); then
            [[ $info =~ (^|[[:space:]])JobState=([A-Z_]+) ]] && E2E_JOB_STATE=${BASH_REMATCH[2]}
        elif [[ $info == *"Invalid job id"* ]]; then
            e2e_log "job $jid: record gone before its end was seen"
            return 125
        fi
        case $E2E_JOB_STATE in
        PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | REQUEUE_HOLD | REQUEUE_FED | RESIZING | SIGNALING | STAGE_OUT | '') ;;
        *)
            [[ $info =~ (^|[[:space:]])ExitCode=([0-9]+):([0-9]+) ]] || return 1
            code=${BASH_REMATCH[2]}
            sig=${BASH_REMATCH[3]}
            ((sig == 0)) || return $((128 + sig))
            [[ $E2E_JOB_STATE == COMPLETED || $code != 0 ]] || return 1
            return "$code"
            ;;
        esac
        sleep 0.2
    done
    e2e_log "TIMEOUT: job $jid still ${E2E_JOB_STATE:-unknown} after ${secs} s; cancelling it"
    timeout 10 scancel "$jid" 2>/dev/null || true
    return 124
}

# requeue_job DIR RUN_ARGS...: submit a 2-node batch job (one task per node, --requeue); E2E_JOB
# is its id (scancelled at exit). In each run R of the job (SLURM_RESTART_COUNT, 0 first)
# its script writes the run's nodelist to DIR/nodesR, runs `srun tfslurm run --requeue
# --max-requeues 1 --auth munge RUN_ARGS...` with each task's output in DIR/runR-task<t>.out,
# writes "srun: <status>" to DIR/runR.out and exits with srun's status. RUN_ARGS reach tfslurm
# as given (a word like '$OUT_DIR' is the task's; OUT_DIR is DIR).
requeue_job() {
    local dir=$1
    shift
    {
        printf '#!/bin/bash\n'
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s\n' 'run=${SLURM_RESTART_COUNT:-0}' \
            'echo "$SLURM_JOB_NODELIST" >"$OUT_DIR/nodes$run"' \
            'rc=0'
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s' 'srun -o "$OUT_DIR/run$run-task%t.out" "$E2E_TFSLURM" run --requeue' \
            ' --max-requeues 1 --auth munge'
        printf ' %q' "$@"
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s\n' ' || rc=$?' 'echo "srun: $rc" >"$OUT_DIR/run$run.out"' 'exit "$rc"'
    } >"$dir/job.sh"
    chmod +x "$dir/job.sh"
    E2E_JOB=$(OUT_DIR=$dir sbatch_submit -N2 --ntasks-per-node=1 --requeue --export=ALL \
        -o /dev/null -e "$dir/job.err" "$dir/job.sh")
    on_exit "timeout 10 scancel $E2E_JOB 2>/dev/null || true"
}

# wait_requeued JOBID SECONDS LABEL GLOB: wait until the job was requeued once and is pending
# again (Restarts=1, JobState=PENDING); else fail with the job's last record and, after LABEL,
# the files GLOB names then (e.g. the first run's output).
wait_requeued() {
    local jid=$1 secs=$2 label=$3 glob=$4 info='' i
    for ((i = 0; i < secs * 5; i++)); do
        info=$(timeout 10 scontrol show job -o "$jid" 2>&1 || true)
        [[ $info == *"Restarts=1"* && $info == *"JobState=PENDING"* ]] && return 0
        sleep 0.2
    done
    # shellcheck disable=SC2086 # GLOB is expanded here, at the failure
    fail "job $jid was not requeued within $secs s: $info; $label: $(cat -- $glob 2>/dev/null)"
}

# sacct_of NAME SECONDS [WANT]: the accounting lines "JOBID|STATE|EXITCODE" of the job named NAME
# (srun -J NAME) and of its steps (JOBID.0, ...), in sacct's order, once none is pending, running
# or completing: slurmctld sends the records to slurmdbd a moment after srun returns. With WANT
# ("STATE|EXITCODE" of each line, space-separated: "FAILED|1:0 FAILED|1:0"), until they say that:
# a step's record can be final before its exit code is (seen on 22.05 under load: FAILED|0:0,
# then FAILED|1:0). Fails after SECONDS with what sacct said last, when nothing final came; a
# final record that never became WANT is printed for the caller's assertion to show.
sacct_of() {
    local name=$1 secs=$2 want=${3-} lines='' final='' i
    for ((i = 0; i < secs * 5; i++)); do
        lines=$(timeout 10 sacct -a -n -P -S now-1days --name "$name" -o JobID,State,ExitCode 2>&1 || true)
        if [[ $lines == *"|"* && $lines != *"|PENDING|"* && $lines != *"|RUNNING|"* &&
            $lines != *"|COMPLETING|"* && $lines == *.0"|"* ]]; then
            final=$lines
            if [[ -z $want || "$(cut -d'|' -f2- <<<"$lines" | tr '\n' ' ' | sed 's/ $//')" == "$want" ]]; then
                break
            fi
        fi
        sleep 0.2
    done
    [[ -n $final ]] || fail "sacct has no final record of job \"$name\" and its step after $secs s: $lines"
    printf '%s\n' "$final"
}

# run_stdout STATUS SECONDS CMD...: run CMD bounded by SECONDS, expect exit STATUS; its stdout
# (the tasks' output) goes to E2E_OUTPUT, its stderr (srun's "queued and waiting" notes and
# errors) to E2E_STDERR; both are shown on failure.
run_stdout() {
    local want=$1 secs=$2 rc=0 err
    shift 2
    err=$(mktemp "$E2E_TMPDIR/stderr.XXXXXX")
    E2E_OUTPUT=$(run_bounded "$secs" "$@" 2>"$err") || rc=$?
    E2E_STDERR=$(cat -- "$err")
    rm -f -- "$err"
    ((rc == want)) && return 0
    fail "exit status $rc, expected $want: $*"$'\n'"  stdout: ${E2E_OUTPUT//$'\n'/$'\n'  | }"$'\n'"  stderr: ${E2E_STDERR//$'\n'/$'\n'  | }"
}

# The line of a test trainer (tests/trainer/tf_trainer.cpp) that listens on its port, for
# wait_for_lines: tfslurm's own debug lines say "listening on" too (the coordinator's).
# shellcheck disable=SC2034 # used by the tests that source this file
k_trainer_listening='^tf_trainer\[[^]]*]: listening on'

# wait_for_lines PATTERN COUNT SECONDS FILE...: wait until the FILEs together have COUNT lines
# matching PATTERN (files that do not exist yet count as empty).
wait_for_lines() {
    local pattern=$1 count=$2 secs=$3 i
    shift 3
    for ((i = 0; i < secs * 10; i++)); do
        (($(cat -- "$@" 2>/dev/null | grep -c -- "$pattern" || true) >= count)) && return 0
        sleep 0.1
    done
    fail "waited $secs s for $count lines matching '$pattern' in $*:"$'\n'"$(cat -- "$@" 2>/dev/null)"
}

# --- assertions --------------------------------------------------------------------------------

# assert_eq EXPECTED ACTUAL MESSAGE
assert_eq() {
    [[ $1 == "$2" ]] && return 0
    fail "${3:-values differ}"$'\n'"  expected: $1"$'\n'"  actual:   $2"
}

# assert_contains HAYSTACK NEEDLE MESSAGE
assert_contains() {
    [[ $1 == *"$2"* ]] && return 0
    fail "${3:-text not found}"$'\n'"  expected to contain: $2"$'\n'"  actual: $1"
}

# assert_status EXPECTED CMD...: run CMD and check its exit status. Its stdout and stderr
# (combined) are left in E2E_OUTPUT and shown on failure. Bound CMD yourself, e.g.
#   assert_status 0 run_bounded 60 srun -N3 -n6 true
assert_status() {
    local want=$1 rc=0
    shift
    E2E_OUTPUT=$("$@" 2>&1) || rc=$?
    ((rc == want)) && return 0
    fail "exit status $rc, expected $want: $*"$'\n'"  | ${E2E_OUTPUT//$'\n'/$'\n'  | }"
}

# assert_no_drain: every node still accepts work (a failing plugin must never drain a node).
assert_no_drain() {
    local states
    states=$(timeout 10 sinfo -h -N -o '%N=%t' | sort -u | tr '\n' ' ')
    [[ $states != *drain* && $states != *drng* && $states != *down* ]] ||
        fail "a node is drained or down after a plugin failure: $states"
}

# check_tf_configs LINES EXPECTED_TASKS EXPECTED_PS: LINES are "<rank> <hostname> <TF_CONFIG>"
# lines, one per task. Checks: one line per rank 0..N-1; every task has a TF_CONFIG and all agree
# on the cluster; each task's own entry (cluster[type][index]) names the host it runs on; no
# address:port is used twice; EXPECTED_PS parameter servers. Prints a summary line.
check_tf_configs() {
    local lines=$1 ntasks=$2 nps=$3
    local rank host tf cluster first_cluster='' type index list entry
    local -a entries
    local -A seen_rank=() seen_endpoint=()
    local count=0
    while read -r rank host tf; do
        [[ -n $rank ]] || continue
        count=$((count + 1))
        [[ $rank =~ ^[0-9]+$ ]] || fail "not a rank: \"$rank\" in: $rank $host $tf"
        [[ -z ${seen_rank[$rank]:-} ]] || fail "rank $rank printed twice"
        seen_rank[$rank]=1
        [[ $tf =~ ^\{\"cluster\":(\{.*\}),\"task\":\{\"type\":\"([a-z]+)\",\"index\":([0-9]+)\}\}$ ]] ||
            fail "rank $rank: not a TF_CONFIG: \"$tf\""
        cluster=${BASH_REMATCH[1]} type=${BASH_REMATCH[2]} index=${BASH_REMATCH[3]}
        if [[ -z $first_cluster ]]; then
            first_cluster=$cluster
        fi
        assert_eq "$first_cluster" "$cluster" "rank $rank disagrees on the cluster"
        [[ $cluster =~ \"$type\":\[([^]]*)\] ]] || fail "rank $rank: no job \"$type\" in $cluster"
        list=${BASH_REMATCH[1]//\"/}
        IFS=, read -r -a entries <<<"$list"
        ((index < ${#entries[@]})) || fail "rank $rank: $type index $index outside [$list]"
        entry=${entries[index]}
        assert_eq "$host" "${entry%:*}" "rank $rank ($type $index) is advertised as $entry"
    done <<<"$lines"
    assert_eq "$ntasks" "$count" "number of tasks that printed a TF_CONFIG"
    for ((rank = 0; rank < ntasks; rank++)); do
        [[ -n ${seen_rank[$rank]:-} ]] || fail "rank $rank printed nothing"
    done
    IFS=, read -r -a entries <<<"$(sed -E 's/"[a-z]+":\[//g; s/[]{}"]//g' <<<"$first_cluster")"
    for entry in "${entries[@]}"; do
        [[ -z ${seen_endpoint[$entry]:-} ]] || fail "endpoint $entry appears twice: $first_cluster"
        seen_endpoint[$entry]=1
    done
    if ((nps == 0)); then
        [[ $first_cluster != *'"ps":'* ]] || fail "expected no ps: $first_cluster"
    else
        [[ $first_cluster =~ \"ps\":\[([^]]*)\] ]] || fail "expected $nps ps: $first_cluster"
        IFS=, read -r -a entries <<<"${BASH_REMATCH[1]}"
        assert_eq "$nps" "${#entries[@]}" "number of ps in $first_cluster"
    fi
    e2e_log "TF_CONFIG ok for $ntasks tasks: $first_cluster"
}

# The command a task runs to print "<rank> <hostname> <TF_CONFIG>" (TF_CONFIG has no spaces).
# shellcheck disable=SC2016,SC2034 # expanded by the task's shell; used by the tests
readonly SPANK_PRINT_TASK='printf "%s %s %s\n" "$SLURM_PROCID" "$(hostname)" "${TF_CONFIG-unset}"'

# --- what a test needs -------------------------------------------------------------------------

# require_tfslurm: E2E_TFSLURM must name the tfslurm executable (set by CTest).
require_tfslurm() {
    [[ -n $E2E_TFSLURM && -x $E2E_TFSLURM ]] ||
        fail "E2E_TFSLURM is not an executable (\"$E2E_TFSLURM\"); run the test through ctest"
}

# require_trainer: for `tfslurm run` on the cluster: E2E_TRAINER must name the fake
# TensorFlow trainer and E2E_TFSLURM tfslurm (both set by CTest); the launchers authenticate
# with MUNGE credentials from the test cluster's own munged, whose socket they find where Slurm
# says it is (AuthInfo=socket=... in the cluster's slurm.conf): TFSLURM_MUNGE_SOCKET is unset.
require_trainer() {
    [[ -n ${E2E_TRAINER:-} && -x ${E2E_TRAINER:-} ]] ||
        fail "E2E_TRAINER is not an executable (\"${E2E_TRAINER:-}\"); run the test through ctest"
    require_tfslurm
    unset TFSLURM_MUNGE_SOCKET
    export E2E_TRAINER E2E_TFSLURM
}

# start_three_node_step DIR: in the background, a 3-node `tfslurm run --ps 1` step with short
# heartbeats (--grace 3, --heartbeat 0.5, --heartbeat-timeout 3) whose trainers work for 60 s;
# task outputs in DIR/task-<rank>.out, srun's in DIR/srun.out. Returns once every trainer
# listens; sets E2E_SRUN_PID and E2E_JOB, and kills srun and cancels the job on exit (a test
# that fails with srun still waiting must not leave the job behind for the next tests). Used by
# the lost-node tests.
start_three_node_step() {
    local dir=$1
    timeout -k 5 60 srun -J "$E2E_NAME-$$" -N3 --ntasks-per-node=1 -o "$dir/task-%t.out" \
        "$E2E_TFSLURM" run --ps 1 --auth munge --grace 3 --heartbeat 0.5 --heartbeat-timeout 3 \
        -- "$E2E_TRAINER" --work-ms 60000 >"$dir/srun.out" 2>&1 &
    E2E_SRUN_PID=$!
    on_exit "kill $E2E_SRUN_PID 2>/dev/null || true"
    wait_for_lines "$k_trainer_listening" 3 60 "$dir"/task-{0,1,2}.out
    E2E_JOB=$(timeout 10 squeue -h -n "$E2E_NAME-$$" -o %A)
    [[ $E2E_JOB =~ ^[0-9]+$ ]] || fail "no job id in the queue: $E2E_JOB"
    on_exit "timeout 10 scancel $E2E_JOB 2>/dev/null || true"
}

# running_job: the id of the running job named tfslurm (srun's name for `tfslurm run`), waiting
# up to 60 s for it to start (a busy machine's srun may take seconds); fails without one.
running_job() {
    local i job=
    for ((i = 0; i < 600; i++)); do
        job=$(timeout 10 squeue -h -t RUNNING -o %i -n tfslurm | sed -n 1p)
        [[ -z $job ]] || break
        sleep 0.1
    done
    [[ -n $job ]] || fail "the step did not start"
    printf '%s\n' "$job"
}

# node_pids NODE: the pids of NODE's processes (those in its network namespace) but its slurmd,
# one a line.
node_pids() {
    local slurmd_pid
    slurmd_pid=$(cat "$TC_DIR/pid/slurmd-$1.pid" 2>/dev/null || true)
    ip netns pids "$TC_NS_PREFIX$1" 2>/dev/null | grep -vx "${slurmd_pid:-0}" || true
}

# launcher_pids NODE: pids of the tfslurm launchers ("tfslurm run ...") running on NODE; not
# their trainers' keepers or supervisors (forked copies named tfslurm-keeper, tfslurm-super and
# tfslurm-init).
launcher_pids() {
    local pid exe arg1
    while read -r pid; do
        [[ -n $pid ]] || continue
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) != tfslurm-* ]] || continue
        exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 1p) || continue
        arg1=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 2p) || continue
        [[ $exe == "$E2E_TFSLURM" && $arg1 == run ]] && printf '%s\n' "$pid"
    done < <(node_pids "$1")
}

# progress_files NODE: the trainers' progress files on NODE (TFSLURM_PROGRESS_FILE in each
# process's environment), once each.
progress_files() {
    local pid
    for pid in $(node_pids "$1"); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^TFSLURM_PROGRESS_FILE=//p'
    done | sort -u
}

# node_processes NODE: NODE's processes but its slurmd, one line each (pid, parent, group,
# state, where the kernel has it waiting, command line), and the kernel stack of each tfslurm
# launcher among them: for a failure's diagnosis (e2e_diagnose).
node_processes() {
    local node=$1 pid
    local -a procs
    mapfile -t procs < <(node_pids "$node")
    printf '%s: processes on %s:\n' "$E2E_NAME" "$node"
    ((${#procs[@]} > 0)) || { echo "  none"; return 0; }
    ps -o pid=,ppid=,pgid=,stat=,wchan:24=,args= -p "$(IFS=,; echo "${procs[*]}")" | cut -c1-200 | sed 's/^/  /'
    for pid in $(launcher_pids "$node"); do
        printf '  launcher %s, kernel stack:\n' "$pid"
        timeout 5 cat "/proc/$pid/stack" 2>/dev/null | head -20 | sed 's/^/    /' || true
    done
}

# daemon_lines JOBID: what slurmctld and the nodes' slurmd logged about job JOBID and its steps
# (at most 40 lines each): for a failure's diagnosis (e2e_diagnose).
daemon_lines() {
    local jid=$1 log
    for log in "$TC_DIR"/log/slurmctld.log "$TC_DIR"/log/slurmd-*.log; do
        [[ -r $log ]] || continue
        printf '%s: %s about job %s:\n' "$E2E_NAME" "$(basename "$log" .log)" "$jid"
        grep -E "(JobId=|StepId=|\[)$jid([]. ]|$)" "$log" | tail -40 | cut -c1-240 | sed 's/^/  /' || true
    done
}

# hostile_client_dir DIR NAME: DIR/NAME, owned by the hostile user (nobody), with
# hostile_client.py in it (DIR becomes world-searchable); prints its path. The client runs with
# Debian's /usr/bin/python3.
hostile_client_dir() {
    [[ -x /usr/bin/python3 ]] || fail "/usr/bin/python3 (Debian's python3) is missing"
    chmod 755 "$1"
    mkdir "$1/$2"
    cp -- "$e2e_lib_dir/hostile_client.py" "$1/$2/"
    chown -R nobody: "$1/$2"
    printf '%s\n' "$1/$2"
}

# hostile_client HDIR NODE SECONDS ARGS...: HDIR/hostile_client.py ARGS... (HDIR made by
# hostile_client_dir) as the hostile user (nobody) on NODE, with Debian's python3, ended after
# SECONDS (and the node command 10 s later).
hostile_client() {
    local hdir=$1 node=$2 secs=$3
    shift 3
    timeout -k 5 "$((secs + 10))" "$E2E_TEST_CLUSTER" node "$node" runuser -u nobody -- \
        timeout -k 5 "$secs" /usr/bin/python3 "$hdir/hostile_client.py" "$@"
}

# node_lost_step DIR: start_three_node_step DIR, then lose_node n3 and wait for srun: E2E_RC is
# its status, E2E_OUT every task's output then srun's. The caller checks what rank 0's launcher
# said (DIR/task-0.out) and that nothing is left.
# shellcheck disable=SC2034 # E2E_RC and E2E_OUT are the test's to read
node_lost_step() {
    local dir=$1
    start_three_node_step "$dir"
    lose_node n3
    E2E_RC=0
    wait "$E2E_SRUN_PID" || E2E_RC=$?
    E2E_OUT=$(cat -- "$dir"/task-{0,1,2}.out 2>/dev/null)$'\n'$(cat "$dir/srun.out")
}

# freezer_group NAME: a new cgroup NAME in which processes can be frozen: the cgroup v1 freezer's
# or, without it, cgroup v2's; prints its directory, or nothing (status 1) where neither can be
# written. freeze_group, thaw_group and remove_group act on it.
freezer_group() {
    local root dir
    for root in /sys/fs/cgroup/freezer /sys/fs/cgroup/unified /sys/fs/cgroup; do
        dir=$root/$1
        mkdir -- "$dir" 2>/dev/null || continue
        if [[ -e $dir/freezer.state || -e $dir/cgroup.freeze ]]; then
            printf '%s\n' "$dir"
            return 0
        fi
        rmdir -- "$dir" 2>/dev/null || true
    done
    return 1
}

# freeze_group DIR: freeze every process of cgroup DIR (freezer_group) and wait until they are
# (at most 10 s): a frozen process runs none of its code, whatever signal it gets, until thawed.
freeze_group() {
    local i
    if [[ -e $1/freezer.state ]]; then
        echo FROZEN >"$1/freezer.state"
        for ((i = 0; i < 1000; i++)); do
            [[ $(cat "$1/freezer.state") == FROZEN ]] && return 0
            sleep 0.01
        done
    else
        echo 1 >"$1/cgroup.freeze"
        for ((i = 0; i < 1000; i++)); do
            grep -qx 'frozen 1' "$1/cgroup.events" && return 0
            sleep 0.01
        done
    fi
    fail "cgroup $1 did not freeze within 10 s"
}

# join_group DIR PID...: the processes PID... moved into cgroup DIR (one that ended meanwhile is
# skipped); into a frozen one, they freeze as they join.
join_group() {
    local dir=$1 pid
    shift
    for pid; do
        echo "$pid" >"$dir/cgroup.procs" 2>/dev/null || true
    done
}

# thaw_group DIR and remove_group DIR: the cgroup DIR thawed; removed once its processes ended
# (at most 10 s, else left, and said).
thaw_group() {
    if [[ -e $1/freezer.state ]]; then echo THAWED >"$1/freezer.state"; else echo 0 >"$1/cgroup.freeze"; fi
}
remove_group() {
    local i
    for ((i = 0; i < 1000; i++)); do
        rmdir -- "$1" 2>/dev/null && return 0
        sleep 0.01
    done
    e2e_log "cgroup $1 still holds processes after 10 s: left in place"
}

# lose_node NODE [LABEL]: a lost node, as the step sees it: SIGKILL to every process in NODE's
# namespace but its slurmd (the node's kernel stays up: its connections are reset), after
# checking that the step is there (a slurmstepd, a launcher and a trainer at least).
# A node that dies takes its processes all at once, and none acts on another's end: so they are
# frozen (a cgroup freezer, freezer_group) before any is killed, and thawed with SIGKILL
# pending. Killed one by one, srun's shepherd (a child of srun that cancels the step when srun
# dies) could cancel the whole step on every node between srun's kill and its own (SIGSTOP is
# no substitute: the kernel wakes a stopped process group that a death orphans, with SIGHUP and
# SIGCONT). Without a writable freezer, they are killed one by one, as before. The trainers'
# progress files are then removed, as the node's reboot would (progress_files).
lose_node() {
    local node=$1 label=${2:+$2: } group pid round members stat
    local -a victims more fields files
    mapfile -t victims < <(node_pids "$node")
    ((${#victims[@]} >= 3)) || fail "expected a slurmstepd, a launcher and a trainer on $node: ${victims[*]:-none}"
    if group=$(freezer_group "tfslurm-e2e-lose-$node-$$"); then
        # Should this test fail before the thaw, nothing stays frozen.
        on_exit "[[ ! -d $group ]] || { thaw_group $group; remove_group $group; }"
        join_group "$group" "${victims[@]}"
        freeze_group "$group"
        # A child forked before its parent joined stayed behind: it joins too (frozen as it
        # does), until none is left. Its children fork into the group by themselves.
        # No client per process (the node stays frozen meanwhile, and its heartbeats with it):
        # the group's members read once a round, each parent from /proc.
        for ((round = 0; round < 20; round++)); do
            more=()
            members=" $(tr '\n' ' ' <"$group/cgroup.procs")"
            for pid in $(node_pids "$node"); do
                [[ $members == *" $pid "* ]] && continue
                { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || continue
                read -r -a fields <<<"${stat##*) }" # state, parent, ...
                [[ $members == *" ${fields[1]} "* ]] && more+=("$pid")
            done
            ((${#more[@]} > 0)) || break
            join_group "$group" "${more[@]}"
        done
        mapfile -t victims <"$group/cgroup.procs"
        mapfile -t files < <(progress_files "$node")
        kill -KILL "${victims[@]}" 2>/dev/null || true
        thaw_group "$group"
        remove_group "$group"
    else
        mapfile -t files < <(progress_files "$node")
        kill -KILL "${victims[@]}" 2>/dev/null || true # one may end as its parent is killed
    fi
    # No process of the step is left on the node to remove its trainers' progress files: they
    # go as with a lost node's reboot (killed, nothing can make them again).
    ((${#files[@]} == 0)) || rm -f -- "${files[@]}"
    e2e_log "${label}killed every process of the step on $node: ${victims[*]}"
}

# cut_off NODE: take NODE's link (its veth on the bridge) down: the node is cut off from the
# others and from slurmctld. The link is brought back up, and the node resumed if Slurm set it
# down or drained meanwhile, when the test exits, whatever its outcome (restore_link NODE does
# that earlier).
cut_off() {
    on_exit "restore_link $1"
    ip link set dev "$TC_VETH_PREFIX$1" down
    e2e_log "link of $1 ($TC_VETH_PREFIX$1) down"
}

# restore_link NODE: NODE's link up again (see cut_off), NODE resumed if it is down or drained.
restore_link() {
    local node=$1 state
    ip link set dev "$TC_VETH_PREFIX$node" up 2>/dev/null || true
    state=$(timeout 10 sinfo -h -n "$node" -o %t 2>/dev/null || true)
    if [[ $state == *down* || $state == *drain* || $state == *drng* ]]; then
        timeout 10 scontrol update nodename="$node" state=resume 2>/dev/null || true
    fi
}

# use_spank_plugin: for tests of the SPANK plugin: the plugin built for the cluster's release.
# For the machine's own release E2E_SPANK_PLUGIN (set by CTest), else
# $E2E_BUILD_DIR/plugins/spank/spank_tfslurm.so, must exist; for another release the one
# `test-cluster build --slurm R` built with that release's toolchain and headers (cached; built
# now if the sources changed), copied into E2E_TMPDIR where that release's slurmstepd sees it.
# E2E_HOST_SPANK_PLUGIN keeps the machine's own. spank_install then puts E2E_SPANK_PLUGIN
# into the test cluster's plugin stack: SPANK_CONF, a file in <state dir>/etc/plugstack.conf.d/
# (which <state dir>/etc/plugstack.conf includes), removed when the test exits, whatever the
# outcome. No daemon restart is needed: every srun, sbatch, salloc and slurmstepd reads the
# stack when it starts.
use_spank_plugin() {
    : "${E2E_SPANK_PLUGIN:=${E2E_BUILD_DIR:+$E2E_BUILD_DIR/plugins/spank/spank_tfslurm.so}}"
    E2E_HOST_SPANK_PLUGIN=$E2E_SPANK_PLUGIN
    export E2E_SPANK_PLUGIN E2E_HOST_SPANK_PLUGIN
    SPANK_CONF=$TC_DIR/etc/plugstack.conf.d/e2e-$E2E_NAME-$$.conf
    [[ -n $E2E_SPANK_PLUGIN && -f $E2E_SPANK_PLUGIN ]] ||
        fail "the SPANK plugin is not built (\"${E2E_SPANK_PLUGIN}\"): configure with" \
            "TFSLURM_BUILD_SPANK=ON (needs libslurm-dev) and run the test through ctest"
    if [[ -n ${TC_ROOTFS:-} ]]; then
        E2E_RELEASE_BUILD=$(run_bounded 1800 "$E2E_TEST_CLUSTER" build --slurm "$TC_SLURM") ||
            fail "could not build tfslurm for Slurm $TC_SLURM: $E2E_TEST_CLUSTER build --slurm $TC_SLURM"
        export E2E_RELEASE_BUILD
        E2E_SPANK_PLUGIN=$E2E_TMPDIR/spank_tfslurm.so
        cp -- "$E2E_RELEASE_BUILD/spank_tfslurm.so" "$E2E_SPANK_PLUGIN"
        e2e_log "the SPANK plugin built for Slurm $TC_SLURM: $E2E_RELEASE_BUILD"
    fi
    on_exit "rm -f -- '$SPANK_CONF' '$SPANK_CONF.tmp'"
}

# spank_install [ARG...]: (re)write this test's plugstack line: required <plugin> ARG...
# (atomically: a step starting meanwhile sees the old or the new line, never half of one).
spank_install() {
    printf 'required %s%s\n' "$E2E_SPANK_PLUGIN" "${*:+ $*}" >"$SPANK_CONF.tmp"
    mv -f -- "$SPANK_CONF.tmp" "$SPANK_CONF"
}

# spank_uninstall: remove this test's plugstack line (also done on exit).
spank_uninstall() { rm -f -- "$SPANK_CONF"; }

# --- nothing left behind -----------------------------------------------------------------------

# no_leftovers [SECONDS]: within SECONDS (default 15), no task or step processes may remain in
# any node namespace (only slurmd) and no job may be left in the queue.
# shellcheck disable=SC2120 # SECONDS is optional
no_leftovers() {
    local secs=${1:-15} i node pid line state jobs
    local -a left=()
    for ((i = 0; i <= secs * 5; i++)); do
        left=()
        for node in "${TC_NODE_ARRAY[@]}"; do
            while read -r pid; do
                [[ -n $pid ]] || continue
                line=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
                state=${line##*) }
                [[ ${state%% *} != Z ]] || continue
                left+=("$node:$pid($(cat "/proc/$pid/comm" 2>/dev/null))")
            done < <(node_pids "$node")
        done
        jobs=$(timeout 10 squeue -h -o '%A:%T' 2>/dev/null | tr '\n' ' ' || true)
        ((${#left[@]} == 0)) && [[ -z ${jobs// /} ]] && return 0
        sleep 0.2
    done
    fail "leftovers after ${secs} s: processes ${left[*]:-none}; jobs ${jobs:-none}"
}

# --- the examples (examples/) ------------------------------------------------------------------

# use_examples: for tests that run the job scripts and trainers of examples/ as a user would.
# EXAMPLES is the examples directory; PATH (exported: srun and sbatch pass it to every task)
# starts with a directory where `tfslurm` is E2E_TFSLURM and `python3` is Debian's
# /usr/bin/python3, which must import torch (package python3-torch: scripts/setup.sh on this
# machine, scripts/test-cluster in another release's root filesystem, where the tasks run; a
# python3 earlier on PATH, e.g. pyenv's, would not see it). Launchers authenticate with MUNGE.
use_examples() {
    require_tfslurm
    EXAMPLES=$E2E_SOURCE_DIR/examples
    local bin
    bin=$(make_tmpdir)
    chmod 755 "$bin"
    ln -s -- "$E2E_TFSLURM" "$bin/tfslurm"
    ln -s /usr/bin/python3 "$bin/python3"
    "${E2E_TC_EXEC[@]}" "$bin/python3" -c 'import torch' 2>/dev/null ||
        fail "/usr/bin/python3 of Slurm $TC_SLURM's tasks cannot import torch: install" \
            "python3-torch (scripts/setup.sh; scripts/test-cluster rootfs for another release)"
    PATH=$bin:$PATH
    PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
    unset TFSLURM_MUNGE_SOCKET
    export PATH EXAMPLES PYTHONDONTWRITEBYTECODE
}
