#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Helpers for the SPANK plugin's end-to-end tests (tests/e2e/test_spank_*.sh). Source it after
# tests/e2e/lib.sh:
#
#   source "$TFSLURM_SOURCE_DIR/tests/spank/e2e_plugin.sh"
#
# The plugin: TFSLURM_SPANK_PLUGIN, else $TFSLURM_BUILD_DIR/plugins/spank/spank_tfslurm.so.
# spank_install puts it into the test cluster's plugin stack (a file in
# <state dir>/etc/plugstack.conf.d/, which <state dir>/etc/plugstack.conf includes); the file is
# removed when the test exits, whatever the outcome. No daemon restart is needed: every srun,
# sbatch, salloc and slurmstepd reads the stack when it starts.

: "${TFSLURM_SPANK_PLUGIN:=${TFSLURM_BUILD_DIR:+$TFSLURM_BUILD_DIR/plugins/spank/spank_tfslurm.so}}"
export TFSLURM_SPANK_PLUGIN
SPANK_CONF=$TC_DIR/etc/plugstack.conf.d/e2e-$E2E_NAME-$$.conf

[[ -n $TFSLURM_SPANK_PLUGIN && -f $TFSLURM_SPANK_PLUGIN ]] ||
    fail "the SPANK plugin is not built (\"${TFSLURM_SPANK_PLUGIN}\"): configure with" \
        "TFSLURM_BUILD_SPANK=ON (needs libslurm-dev) and run the test through ctest"
on_exit "rm -f -- '$SPANK_CONF' '$SPANK_CONF.tmp'"

# spank_install [ARG...]: (re)write this test's plugstack line: required <plugin> ARG...
# (atomically: a step starting meanwhile sees the old or the new line, never half of one).
spank_install() {
    printf 'required %s%s\n' "$TFSLURM_SPANK_PLUGIN" "${*:+ $*}" >"$SPANK_CONF.tmp"
    mv -f -- "$SPANK_CONF.tmp" "$SPANK_CONF"
}

# spank_uninstall: remove this test's plugstack line (also done on exit).
spank_uninstall() { rm -f -- "$SPANK_CONF"; }

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
