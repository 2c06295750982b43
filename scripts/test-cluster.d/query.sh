# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: "status", "env", "settings", "node" and "logs".

# status, env, settings, node, logs

# check_health VERBOSE: 0 when munged, slurmctld and every slurmd run and every node is
# responding (idle, allocated, mixed or completing).
check_health() {
    local verbose=$1 ok=1 pid i node state states
    say() { if ((verbose)); then printf '%s\n' "$*"; fi; }
    if [[ ! -f $TC_DIR/settings ]]; then
        say "test cluster: not up (no $TC_DIR/settings); start it with: $script_path up"
        return 1
    fi
    say "test cluster in $TC_DIR: Slurm $TC_SLURM${TC_ROOTFS:+ (from $TC_ROOTFS)}, $TC_NODES nodes x $TC_CPUS CPUs, $TC_GPUS GPUs, $TC_NET.0/24 on $TC_BRIDGE"
    if pid=$(daemon_pid munged); then
        say "  munged     running (pid $pid)"
    else
        say "  munged     NOT running (log: $TC_DIR/munge/key/munged.log)"
        ok=0
    fi
    local what
    for what in mariadbd slurmdbd; do
        if pid=$(daemon_pid "$what"); then
            say "  $(printf '%-10s' "$what") running (pid $pid)"
        else
            say "  $(printf '%-10s' "$what") NOT running (log: $TC_DIR/log/$what.log)"
            ok=0
        fi
    done
    if pid=$(daemon_pid slurmctld); then
        if ctld_responding; then
            say "  slurmctld  running (pid $pid), responding"
        else
            say "  slurmctld  running (pid $pid), NOT responding (log: $TC_DIR/log/slurmctld.log)"
            ok=0
        fi
    else
        say "  slurmctld  NOT running (log: $TC_DIR/log/slurmctld.log)"
        ok=0
    fi
    states=
    ((ok)) && states=$(node_states || true)
    for ((i = 1; i <= TC_NODES; i++)); do
        node=$(node_name "$i")
        state=$(grep -E "^$node " <<<"$states" || true)
        state=${state#* }
        if pid=$(daemon_pid slurmd "$node"); then
            case $state in
            idle | alloc | mix | comp | allocated | mixed | completing)
                say "  $node         slurmd running (pid $pid), $(node_addr "$i"), $state"
                ;;
            *)
                say "  $node         slurmd running (pid $pid), $(node_addr "$i"), state ${state:-unknown} (log: $TC_DIR/log/slurmd-$node.log)"
                ok=0
                ;;
            esac
        else
            say "  $node         slurmd NOT running (log: $TC_DIR/log/slurmd-$node.log)"
            ok=0
        fi
    done
    if ((ok)); then
        say "healthy"
        return 0
    fi
    say "NOT healthy; restart with: $script_path down && $script_path up"
    return 1
}

cmd_status() {
    load_requested
    validate_dir
    load_recorded || true
    check_health 1 || return 1
    # A caller that asks for a release (the e2e fixture with TFSLURM_TC_SLURM) is not served by
    # a healthy cluster of another one.
    if [[ -n ${TFSLURM_TC_SLURM:-} && $TFSLURM_TC_SLURM != "$TC_SLURM" ]]; then
        printf 'but it runs Slurm %s, not TFSLURM_TC_SLURM=%s\n' "$TC_SLURM" "$TFSLURM_TC_SLURM"
        return 1
    fi
}

require_recorded() {
    load_requested
    validate_dir
    load_recorded || die "no test cluster in $TC_DIR (no settings file); start it with: $script_path up"
}

cmd_env() {
    require_recorded
    printf 'export SLURM_CONF=%q\n' "$(conf_path)"
    # Another release's clients: the wrappers that enter its root filesystem come first.
    # shellcheck disable=SC2016 # $PATH is the caller's, expanded by its eval
    [[ -z $TC_ROOTFS ]] || printf 'export PATH=%q:"$PATH"\n' "$TC_DIR/bin"
}

cmd_settings() {
    require_recorded
    local key var i names=
    printf 'TC_DIR=%q\n' "$TC_DIR"
    for key in "${k_keys[@]}" "${!k_fixed[@]}"; do
        var=TC_$key
        printf 'TC_%s=%q\n' "$key" "${!var}"
    done
    printf 'TC_HOST=%q\n' "$TC_HOST"
    printf 'TC_ROOTFS=%q\n' "$TC_ROOTFS"
    printf 'TC_CONF=%q\n' "$(conf_path)"
    for ((i = 1; i <= TC_NODES; i++)); do
        names+="$(node_name "$i") "
    done
    printf 'TC_NODE_NAMES=%q\n' "${names% }"
    printf 'TC_NODELIST=%q\n' "$(hostlist_of "$TC_NODE_PREFIX" "$TC_NODES")"
}

cmd_node() {
    (($# >= 2)) || die "usage: $prog node NODE CMD [ARGS...]"
    need_root
    require_recorded
    local node=$1 pid
    shift
    if ! [[ $node =~ ^${TC_NODE_PREFIX}([0-9]+)$ ]] || ((BASH_REMATCH[1] < 1 || BASH_REMATCH[1] > TC_NODES)); then
        die "unknown node \"$node\"; nodes are $(hostlist_of "$TC_NODE_PREFIX" "$TC_NODES")"
    fi
    pid=$(daemon_pid slurmd "$node") ||
        die "slurmd for $node is not running, so its namespaces are gone (log: $TC_DIR/log/slurmd-$node.log)"
    # Entering the mount namespace resets the working directory; go back to the caller's.
    # Another release's slurmd runs chrooted: take its root directory and working directory too
    # (--wd=DIR would be opened outside that root, leaving the command with no valid directory).
    local -a root=()
    [[ -z $TC_ROOTFS ]] || root=(--root --wd)
    # shellcheck disable=SC2016 # expanded by sh inside the node
    exec nsenter -t "$pid" --net --uts --mount "${root[@]}" -- \
        sh -c 'cd -- "$1" 2>/dev/null || cd /; shift; exec "$@"' tc-node "$PWD" "$@"
}

cmd_logs() {
    load_requested
    validate_dir
    load_recorded || true
    local file
    for file in "$TC_DIR"/log/slurmctld.log "$TC_DIR"/log/slurmd-*.log "$TC_DIR"/munge/key/munged.log \
        "$TC_DIR"/log/*.out; do
        [[ -e $file ]] && printf '%s\n' "$file"
    done
    [[ -d $TC_DIR/log ]] || die "no logs: no test cluster in $TC_DIR"
}
