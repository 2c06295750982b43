# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: "down", which stops and removes whatever a (possibly crashed
# or partial) cluster left, and never touches another cluster's processes or namespaces.

# down

# known_nodes: node names from the settings, the PID files and the namespace names.
known_nodes() {
    local i file name line
    {
        for ((i = 1; i <= TC_NODES; i++)); do
            node_name "$i"
            printf '\n'
        done
        for file in "$TC_DIR"/pid/slurmd-*.pid; do
            [[ -e $file ]] || continue
            name=${file##*/slurmd-}
            printf '%s\n' "${name%.pid}"
        done
        if command -v ip >/dev/null; then
            while read -r line _; do
                [[ $line =~ ^${TC_NS_PREFIX//./\\.}(${TC_NODE_PREFIX}[0-9]+)$ ]] &&
                    printf '%s\n' "${BASH_REMATCH[1]}"
            done < <(ip netns list 2>/dev/null || true)
        fi
    } | sort -u -V
}

# foreign_ns NS CONF: true when a slurmd of another cluster (another SLURM_CONF) runs in the
# network namespace NS; such a namespace is never touched.
foreign_ns() {
    local ns=$1 conf=$2 pid entry
    [[ -e /run/netns/$ns ]] || return 1
    while read -r pid; do
        [[ $(pid_comm "$pid") == slurmd* ]] || continue
        entry=$(grep -azm1 '^SLURM_CONF=' /proc/"$pid"/environ 2>/dev/null | tr -d '\0') || continue
        [[ -n $entry && $entry != "SLURM_CONF=$conf" ]] && return 0
    done < <(ip netns pids "$ns" 2>/dev/null || true)
    return 1
}

# node_side_pids CONF NODE...: processes in the nodes' network namespaces or recorded UTS and
# mount namespaces. A recorded UTS/mount namespace is
# trusted only if one of its processes is in a node's network namespace, has this cluster's
# SLURM_CONF, or sees the node's name as host name (an inode number can be reused once the
# namespace is gone).
node_side_pids() {
    local conf=$1 node ns file pid
    shift
    local -A in_net=()
    local -a members=()
    for node in "$@"; do
        ns=$(ns_name "$node")
        [[ -e /run/netns/$ns ]] || continue
        while read -r pid; do
            [[ -n $pid ]] || continue
            in_net[$pid]=1
            printf '%s\n' "$pid"
        done < <(ip netns pids "$ns" 2>/dev/null || true)
    done
    for node in "$@"; do
        for file in "$TC_DIR/pid/$node.uts" "$TC_DIR/pid/$node.mnt"; do
            [[ -r $file ]] || continue
            mapfile -t members < <(pids_in_ns "${file##*.}" "$(<"$file")")
            for pid in "${members[@]}"; do
                if [[ -n ${in_net[$pid]:-} ]] || pid_has_env "$pid" "SLURM_CONF=$conf" ||
                    [[ $(nsenter -t "$pid" --uts cat /proc/sys/kernel/hostname 2>/dev/null) == "$node" ]]; then
                    printf '%s\n' "${members[@]}"
                    break
                fi
            done
        done
    done
}

# own_nodes CONF: the known nodes whose network namespace is not another test cluster's (those
# are named in a warning and left alone).
own_nodes() {
    local conf=$1 node
    while read -r node; do
        if foreign_ns "$(ns_name "$node")" "$conf"; then
            warn "network namespace $(ns_name "$node") belongs to another test cluster; leaving it alone"
        else
            printf '%s\n' "$node"
        fi
    done < <(known_nodes)
}

# do_down QUIET: stop and remove everything a (possibly crashed or partial) cluster left, in
# this order. Every process is found by a PID file (verified), this cluster's SLURM_CONF or
# argument, or a namespace of its nodes: never by its name alone. The steps share do_down's
# locals (bash's dynamic scope): quiet, conf, nodes (read) and did, failed (set to 1 when a
# step did something, when something could not be removed).
do_down() {
    local quiet=$1 conf did=0 failed=0
    local -a nodes=()
    load_settings
    validate_dir
    conf=$(conf_path)
    mapfile -t nodes < <(own_nodes "$conf")

    down_cancel_jobs
    down_node_processes
    down_slurmctld
    down_host_daemons
    down_network
    down_netns_dir
    down_state_dir

    if ((!did && !quiet)); then
        log "nothing to take down"
    fi
    if ((failed)); then
        warn "some processes or namespaces could not be removed (see above)"
        return 1
    fi
    return 0
}

# 1. Cancel the jobs while slurmctld still answers.
down_cancel_jobs() {
    daemon_pid slurmctld >/dev/null && [[ -f $conf ]] || return 0
    local jobs
    jobs=$(sctl squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)
    if [[ -n ${jobs// /} ]]; then
        ((quiet)) || log "cancelling jobs: $jobs"
        # shellcheck disable=SC2086 # one argument per job id
        sctl scancel $jobs 2>/dev/null || true
    fi
}

# 2. slurmd (PID file, verified, or found by its environment), whatever is left in the nodes'
#    namespaces (slurmstepd, tasks, 'node' commands) and the clients of this cluster (they
#    would hang forever once the daemons are gone). All get SIGTERM at once and SIGKILL after a
#    short grace: a slurmstepd or srun whose slurmctld is gone would otherwise wait for it. A
#    second sweep catches anything forked meanwhile.
down_node_processes() {
    local -a slurmds=() on_nodes=() clients=() all=()
    local sweep node pid comm
    for ((sweep = 0; sweep < 2; sweep++)); do
        slurmds=()
        on_nodes=()
        clients=()
        for node in "${nodes[@]}"; do
            pid=$(daemon_pid slurmd "$node") && slurmds+=("$pid")
        done
        # One scan of /proc for this cluster's SLURM_CONF (a scan costs a second on a busy host).
        while read -r pid comm; do
            case $comm in
            slurmdbd*) ;; # down_host_daemons, after slurmctld
            slurmd*) slurmds+=("$pid") ;;
            slurmstepd*) on_nodes+=("$pid") ;;
            srun | salloc | sbatch | sattach | sbcast | sstat) clients+=("$pid") ;;
            esac
        done < <(env_procs "SLURM_CONF=$conf")
        uniq_pids slurmds
        mapfile -t -O "${#on_nodes[@]}" on_nodes < <(node_side_pids "$conf" "${nodes[@]}")
        uniq_pids on_nodes
        minus_pids on_nodes "${slurmds[@]}"
        uniq_pids clients
        minus_pids clients "${on_nodes[@]}"
        all=("${slurmds[@]}" "${on_nodes[@]}" "${clients[@]}")
        uniq_pids all
        ((${#all[@]} > 0)) || break
        if ((!quiet)); then
            ((${#slurmds[@]} == 0)) || log "stopping slurmd: $(describe_pids "${slurmds[@]}")"
            ((${#on_nodes[@]} == 0)) || log "killing processes left on the nodes: $(describe_pids "${on_nodes[@]}")"
            ((${#clients[@]} == 0)) || log "killing clients of this cluster: $(describe_pids "${clients[@]}")"
        fi
        kill_pids 3 "${all[@]}" || failed=1
        did=1
    done
}

# 3. slurmctld, by its PID file (verified) or its environment.
down_slurmctld() {
    local pid
    local -a pids=()
    pid=$(daemon_pid slurmctld) && pids+=("$pid")
    mapfile -t -O "${#pids[@]}" pids < <(pids_with_env "SLURM_CONF=$conf" slurmctld)
    uniq_pids pids
    if ((${#pids[@]} > 0)); then
        ((quiet)) || log "stopping slurmctld: $(describe_pids "${pids[@]}")"
        kill_pids 10 "${pids[@]}" || failed=1
        did=1
    fi
}

# 4. slurmdbd after slurmctld (which sends it what it still holds), then its database, then
#    munged: each by its PID file (verified), or found by its environment or argument.
down_host_daemons() {
    local what grace pid
    local -a pids=()
    for what in slurmdbd mariadbd munged; do
        pids=()
        pid=$(daemon_pid "$what") && pids+=("$pid")
        case $what in
        slurmdbd) mapfile -t -O "${#pids[@]}" pids < <(pids_with_env "SLURM_CONF=$conf" slurmdbd) ;;
        mariadbd) mapfile -t -O "${#pids[@]}" pids < <(pids_with_arg "--datadir=$(db_dir)/data") ;;
        munged) mapfile -t -O "${#pids[@]}" pids < <(pids_with_arg "--socket=$(munge_socket)") ;;
        esac
        uniq_pids pids
        if ((${#pids[@]} > 0)); then
            grace=10
            [[ $what == munged ]] && grace=5
            ((quiet)) || log "stopping $what: $(describe_pids "${pids[@]}")"
            kill_pids "$grace" "${pids[@]}" || failed=1
            did=1
        fi
    done
}

# 5. Network: the nodes' veths and namespaces, then the bridges (unless another test cluster
#    still has ports on them).
down_network() {
    command -v ip >/dev/null || return 0
    local node veth ns bridge ports
    local -a links=()
    for node in "${nodes[@]}"; do
        for veth in "$(veth_name "$node")" "$(ib_veth_name "$node")"; do
            if ip link show dev "$veth" >/dev/null 2>&1; then
                ip link del dev "$veth" 2>/dev/null || true
                links+=("$veth")
            fi
        done
        ns=$(ns_name "$node")
        if [[ -e /run/netns/$ns ]]; then
            ip netns del "$ns" 2>/dev/null || {
                warn "cannot delete network namespace $ns"
                failed=1
            }
            links+=("$ns")
        fi
    done
    for bridge in "$TC_BRIDGE" "$TC_IB_BRIDGE"; do
        ip link show dev "$bridge" >/dev/null 2>&1 || continue
        ports=$(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ print $2 }' | tr '\n' ' ')
        if [[ -n ${ports// /} ]]; then
            warn "bridge $bridge still has ports of another test cluster (${ports% }); leaving it alone"
        else
            ip link del dev "$bridge" || failed=1
            links+=("$bridge")
        fi
    done
    if ((${#links[@]} > 0)); then
        ((quiet)) || log "removed network: ${links[*]}"
        did=1
    fi
}

# 6. /run/netns, if a test cluster created it and no namespace is left in it.
down_netns_dir() {
    if [[ -e $k_netns_marker || ${TC_NETNS_CREATED:-0} == 1 ]] &&
        [[ -d /run/netns && -z $(ls -A /run/netns 2>/dev/null) ]]; then
        local n
        for ((n = 0; n < 5; n++)); do
            mountpoint -q /run/netns || break
            umount /run/netns 2>/dev/null || break
        done
        rmdir /run/netns 2>/dev/null || true
    fi
    [[ -d /run/netns ]] || rm -f -- "$k_netns_marker"
}

# 7. The state directory (its logs first copied to TFSLURM_TC_KEEP_LOGS, if set).
down_state_dir() {
    [[ -d $TC_DIR ]] || return 0
    if [[ -n ${TFSLURM_TC_KEEP_LOGS:-} ]]; then
        local keep=$TFSLURM_TC_KEEP_LOGS
        mkdir -p -- "$keep"
        cp -a -- "$TC_DIR"/log/. "$keep"/ 2>/dev/null || true
        cp -a -- "$TC_DIR"/munge/key/munged.log "$TC_DIR"/settings "$keep"/ 2>/dev/null || true
        if [[ -d $TC_DIR/etc ]]; then
            mkdir -p -- "$keep/etc"
            cp -a -- "$TC_DIR"/etc/. "$keep"/etc/ 2>/dev/null || true
        fi
        ((quiet)) || log "logs copied to $keep"
    fi
    if [[ -e $TC_DIR/$k_marker ]]; then
        rm -rf -- "$TC_DIR"
        did=1
    elif rmdir -- "$TC_DIR" 2>/dev/null; then
        did=1
    else
        # 'up' creates the marker before anything else: without it, this is not ours.
        warn "left $TC_DIR in place: it has no $k_marker, so the test cluster did not create it"
    fi
}

cmd_down() {
    need_root
    local t0
    t0=$(now_us)
    load_requested
    validate_dir
    take_lock
    do_down 0
    log "down in $(elapsed "$t0") s"
}
