# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: "up", from the packages and configuration files to munged,
# accounting (a private MariaDB and slurmdbd), the nodes' network, slurmctld, one slurmd per
# node and a warm-up job.

# up

# Packages the cluster and its smoke test need (the rest of the project: scripts/setup.sh).
# Keep in sync with k_cluster_packages in scripts/setup.sh.
readonly -a k_cluster_packages=(munge libmunge-dev slurm-client slurmctld slurmd slurmdbd
    slurm-wlm-basic-plugins libslurm-dev libpmi2-0-dev iproute2 util-linux procps coreutils gcc
    libc6-dev python3 mariadb-server-core mariadb-client-core)

ensure_packages() {
    local -a missing=()
    local pkg status
    if command -v dpkg-query >/dev/null; then
        local -A installed=()
        while read -r pkg status; do
            [[ $status == ii* ]] && installed[$pkg]=1
        done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${k_cluster_packages[@]}" 2>/dev/null || true)
        for pkg in "${k_cluster_packages[@]}"; do
            [[ -n ${installed[$pkg]:-} ]] || missing+=("$pkg")
        done
    fi
    if ((${#missing[@]} > 0)); then
        log "missing packages: ${missing[*]}; installing them with scripts/setup.sh --cluster-only"
        [[ -f $script_dir/setup.sh ]] ||
            die "missing packages ${missing[*]} and $script_dir/setup.sh not found; install them with apt-get"
        bash "$script_dir/setup.sh" --cluster-only ||
            die "installing ${missing[*]} failed (see the apt output above); run scripts/setup.sh --cluster-only"
    fi
    local cmd
    for cmd in munged mungekey munge unmunge slurmctld slurmd slurmstepd slurmdbd srun sbatch \
        scontrol sinfo squeue scancel sacct ip nsenter unshare mount flock timeout mknod mariadbd \
        mariadb-install-db mariadb; do
        command -v "$cmd" >/dev/null || PATH=$PATH:$k_path command -v "$cmd" >/dev/null ||
            die "command '$cmd' not found; run scripts/setup.sh --cluster-only"
    done
}

# has_topology_yaml: whether the release reads topology.yaml (25.05 on): partitions can then
# have topologies of their own.
has_topology_yaml() { [[ $TC_SLURM != 22.05 && $TC_SLURM != 24.11 ]]; }

# write_topology_yaml: the cluster's default topology is flat (every partition but "topo" lays
# a block distribution out in name order, as on 22.05); "tree" puts the last node alone under
# switch s1 and the others under s2, so that Slurm lays out block steps of partition "topo" in
# the order n3 n1 n2 (with 3 nodes) rather than n1 n2 n3 (tests/e2e/test_env_topology.sh).
write_topology_yaml() {
    local last others
    last=$(node_name "$TC_NODES")
    if ((TC_NODES > 1)); then
        others=$(hostlist_of "$TC_NODE_PREFIX" $((TC_NODES - 1)))
    else
        others=''
    fi
    printf -- '- topology: flat\n  cluster_default: true\n  flat: true\n'
    printf -- '- topology: tree\n  tree:\n    switches:\n'
    printf -- '      - switch: top\n        children: s1%s\n' "${others:+,s2}"
    printf -- '      - switch: s1\n        nodes: %s\n' "$last"
    [[ -n $others ]] && printf -- '      - switch: s2\n        nodes: %s\n' "$others"
    return 0
}

write_configs() {
    local dir=$TC_DIR i node nodes
    nodes=$(hostlist_of "$TC_NODE_PREFIX" "$TC_NODES")
    local cores=$TC_CPUS gres_line=
    ((TC_GPUS > 0)) && gres_line=" Gres=gpu:$TC_GPUS"
    {
        printf '# tfslurm test cluster, written by scripts/test-cluster up (do not edit)\n'
        printf 'ClusterName=%s\n' "$TC_CLUSTER"
        printf 'SlurmctldHost=%s(%s.1)\n' "$TC_HOST" "$TC_NET"
        printf 'SlurmUser=root\nSlurmdUser=root\n'
        printf 'AuthType=auth/munge\nCredType=cred/munge\n'
        printf 'AuthInfo=socket=%s\n' "$(munge_socket)"
        printf 'SlurmctldPort=%s\nSlurmdPort=%s\n' "$TC_CTLD_PORT" "$TC_SLURMD_PORT"
        printf 'StateSaveLocation=%s/spool/ctld\n' "$dir"
        printf 'SlurmdSpoolDir=%s/spool/d/%%n\n' "$dir"
        printf 'SlurmctldPidFile=%s/pid/slurmctld.pid\n' "$dir"
        printf 'SlurmdPidFile=%s/pid/slurmd-%%n.pid\n' "$dir"
        printf 'SlurmctldLogFile=%s/log/slurmctld.log\n' "$dir"
        printf 'SlurmdLogFile=%s/log/slurmd-%%n.log\n' "$dir"
        printf 'SlurmctldDebug=info\nSlurmdDebug=info\n'
        printf 'PlugStackConfig=%s/etc/plugstack.conf\n' "$dir"
        printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n'
        printf 'SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n'
        printf 'JobAcctGatherType=jobacct_gather/none\n'
        # Accounting through slurmdbd (start_accounting), so that sacct answers as at a site.
        printf 'AccountingStorageType=accounting_storage/slurmdbd\n'
        printf 'AccountingStorageHost=127.0.0.1\nAccountingStoragePort=%s\n' "$(dbd_port)"
        # With slurmdbd, the munge socket of the connection to it (AuthInfo covers the rest).
        printf 'AccountingStoragePass=%s\n' "$(munge_socket)"
        printf 'JobCompType=jobcomp/none\n'
        printf 'MpiDefault=%s\n' "$TC_MPI_DEFAULT"
        printf 'MpiParams=ports=%s\n' "$TC_RESV_PORTS"
        printf 'SchedulerType=sched/backfill\n'
        # Heterogeneous jobs are scheduled by the backfill pass only (every bf_interval, 30 s by
        # default): once a second keeps an `srun A : B` from waiting up to 30 s.
        printf 'SchedulerParameters=batch_sched_delay=0,bf_interval=1\n'
        printf 'MinJobAge=%s\n' "$TC_MIN_JOB_AGE"
        printf 'ReturnToService=2\n'
        printf 'SlurmdParameters=config_overrides\n'
        printf 'MailProg=/bin/true\n'
        printf 'EnforcePartLimits=ALL\n'
        printf 'KillWait=5\n'
        printf 'InactiveLimit=0\n'
        ((TC_GPUS > 0)) && printf 'GresTypes=gpu\n'
        for ((i = 1; i <= TC_NODES; i++)); do
            printf 'NodeName=%s NodeAddr=%s CPUs=%s Sockets=1 CoresPerSocket=%s ThreadsPerCore=1 RealMemory=%s%s State=UNKNOWN\n' \
                "$(node_name "$i")" "$(node_addr "$i")" "$TC_CPUS" "$cores" "$TC_MEMORY" "$gres_line"
        done
        printf 'PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n'
        # From 25.05 a partition may have a topology of its own (topology.yaml below): "topo"
        # has the same nodes as "debug" in a tree whose order is not the nodes' name order.
        has_topology_yaml && printf 'PartitionName=topo Nodes=ALL MaxTime=INFINITE State=UP Topology=tree\n'
        if [[ -n $TC_EXTRA_CONF ]]; then
            printf '# TFSLURM_TC_EXTRA_CONF\n%s\n' "$TC_EXTRA_CONF"
        fi
    } >"$dir/etc/slurm.conf"

    if ((TC_GPUS > 0)); then
        local files
        if ((TC_GPUS == 1)); then
            files=$dir/dev/gpu0
        else
            files="$dir/dev/gpu[0-$((TC_GPUS - 1))]"
        fi
        printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "$nodes" "$files" >"$dir/etc/gres.conf"
        for ((i = 0; i < TC_GPUS; i++)); do
            # Character devices with the numbers of /dev/null: Slurm needs real device files.
            mknod -m 666 "$dir/dev/gpu$i" c 1 3
        done
    fi

    has_topology_yaml && write_topology_yaml >"$dir/etc/topology.yaml"

    {
        printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n'
        printf '%s.1 %s\n' "$TC_NET" "$TC_HOST"
        for ((i = 1; i <= TC_NODES; i++)); do
            printf '%s %s\n' "$(node_addr "$i")" "$(node_name "$i")"
        done
    } >"$dir/etc/hosts"

    {
        printf '# tfslurm test cluster SPANK stack: put "required|optional /abs/plugin.so [args]"\n'
        printf '# lines into files %s/etc/plugstack.conf.d/*.conf\n' "$dir"
        printf 'include %s/etc/plugstack.conf.d/*.conf\n' "$dir"
    } >"$dir/etc/plugstack.conf"
}

start_munged() {
    local key=$TC_DIR/munge/key/munge.key out=$TC_DIR/log/munged.out
    local mlog=$TC_DIR/munge/key/munged.log sock
    sock=$(munge_socket)
    "${TC_ENTER[@]}" mungekey -c -b 1024 -k "$key" >>"$out" 2>&1 || die_log "$out" "mungekey could not create $key"
    spawn "$out" "${TC_ENTER[@]}" munged --key-file="$key" --socket="$sock" \
        --pid-file="$TC_DIR/munge/run/munged.pid" --log-file="$mlog" \
        --seed-file="$TC_DIR/munge/key/munged.seed" ||
        die_log "$out" "munged did not start"
    local i
    for ((i = 0; i < TC_TIMEOUT * 10; i++)); do
        [[ -S $sock ]] && daemon_pid munged >/dev/null && break
        sleep 0.1
    done
    daemon_pid munged >/dev/null || die_log "$mlog" "munged is not running after ${TC_TIMEOUT} s (also see $out)"
    "${TC_ENTER[@]}" munge -S "$sock" -n </dev/null 2>>"$out" | "${TC_ENTER[@]}" unmunge -S "$sock" >>"$out" 2>&1 ||
        die_log "$mlog" "munge/unmunge through $sock failed"
}

# start_accounting: a private MariaDB (this machine's, whatever the release: its data in the
# state directory, on 127.0.0.1:db_port only, a password made for this cluster) and the
# release's slurmdbd on 127.0.0.1:dbd_port; slurmctld needs it from its first start.
start_accounting() {
    local dir out=$TC_DIR/log/mariadbd.out password i
    dir=$(db_dir)
    mkdir -p -- "$dir"
    chmod 700 -- "$dir"
    mariadb-install-db --user=root --datadir="$dir/data" --auth-root-authentication-method=socket \
        --skip-test-db >"$TC_DIR/log/mariadb-install-db.out" 2>&1 ||
        die_log "$TC_DIR/log/mariadb-install-db.out" "mariadb-install-db could not create the accounting database"
    # mariadbd stays in the foreground: setsid -f starts it in a session of its own and returns.
    spawn "$out" setsid -f mariadbd --no-defaults --user=root --datadir="$dir/data" \
        --socket="$dir/mariadbd.sock" --pid-file="$dir/mariadbd.pid" --port="$(db_port)" \
        --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin \
        --innodb-buffer-pool-size=32M --log-error="$TC_DIR/log/mariadbd.log" ||
        die_log "$out" "mariadbd did not start"
    for ((i = 0; i < TC_TIMEOUT * 10; i++)); do
        [[ -S $dir/mariadbd.sock ]] && daemon_pid mariadbd >/dev/null && break
        sleep 0.1
    done
    daemon_pid mariadbd >/dev/null || die_log "$TC_DIR/log/mariadbd.log" "mariadbd is not running after ${TC_TIMEOUT} s"
    password=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    # The statements on stdin: the password never shows on a command line.
    mariadb --no-defaults --socket="$dir/mariadbd.sock" >>"$out" 2>&1 <<<"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$password'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
        die_log "$out" "cannot create the database user of slurmdbd"
    # Mode 600 from the start (slurmdbd refuses another; it holds the password).
    (
        umask 077
        exec >"$TC_DIR/etc/slurmdbd.conf"
        printf '# tfslurm test cluster, written by scripts/test-cluster up (do not edit)\n'
        printf 'AuthType=auth/munge\nAuthInfo=socket=%s\n' "$(munge_socket)"
        printf 'DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort=%s\nSlurmUser=root\n' "$(dbd_port)"
        printf 'StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort=%s\n' "$(db_port)"
        printf 'StorageUser=slurm\nStoragePass=%s\nStorageLoc=slurm_acct_db\n' "$password"
        printf 'PidFile=%s/pid/slurmdbd.pid\nLogFile=%s/log/slurmdbd.log\nDebugLevel=info\n' "$TC_DIR" "$TC_DIR"
    )
    out=$TC_DIR/log/slurmdbd.out
    spawn "$out" "${TC_ENTER[@]}" slurmdbd || die_log "$out" "slurmdbd did not start"
    for ((i = 0; i < TC_TIMEOUT * 10; i++)); do
        daemon_pid slurmdbd >/dev/null && ss -Hltn "sport = :$(dbd_port)" 2>/dev/null | grep -q . && return 0
        sleep 0.1
    done
    die_log "$TC_DIR/log/slurmdbd.log" "slurmdbd is not listening on 127.0.0.1:$(dbd_port) after ${TC_TIMEOUT} s (also see $out)"
}

# preflight: names, network and port must be free (another test cluster may be running with
# its own TFSLURM_TC_DIR; it must not share any of them).
preflight() {
    local i node clash busy
    if [[ -d $TC_DIR && -n $(ls -A -- "$TC_DIR") && ! -e $TC_DIR/$k_marker ]]; then
        die "$TC_DIR exists, is not empty and is not a test-cluster directory; choose another TFSLURM_TC_DIR"
    fi
    clash=$(ip -o -4 addr show to "$TC_NET.0/24" 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ' || true)
    [[ -z $clash ]] || die "$TC_NET.0/24 is already in use on this machine (${clash% }); another test cluster? set TFSLURM_TC_NET"
    ! ip link show dev "$TC_BRIDGE" >/dev/null 2>&1 ||
        die "bridge $TC_BRIDGE already exists (another test cluster?); set TFSLURM_TC_BRIDGE"
    clash=$(ip -o -4 addr show to "$TC_IB_NET.0/24" 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ' || true)
    [[ -z $clash ]] || die "$TC_IB_NET.0/24 is already in use on this machine (${clash% }); another test cluster? set TFSLURM_TC_IB_NET"
    ! ip link show dev "$TC_IB_BRIDGE" >/dev/null 2>&1 ||
        die "bridge $TC_IB_BRIDGE already exists (another test cluster?); set TFSLURM_TC_IB_BRIDGE"
    for ((i = 1; i <= TC_NODES; i++)); do
        node=$(node_name "$i")
        [[ ! -e /run/netns/$(ns_name "$node") ]] ||
            die "network namespace $(ns_name "$node") already exists (another test cluster?); set TFSLURM_TC_NS_PREFIX"
        ! ip link show dev "$(veth_name "$node")" >/dev/null 2>&1 ||
            die "interface $(veth_name "$node") already exists (another test cluster?); set TFSLURM_TC_VETH_PREFIX"
        ! ip link show dev "$(ib_veth_name "$node")" >/dev/null 2>&1 ||
            die "interface $(ib_veth_name "$node") already exists (another test cluster?); set TFSLURM_TC_VETH_PREFIX"
    done
    busy=$(ss -Hltnp "sport = :$TC_CTLD_PORT" 2>/dev/null || true)
    [[ -z $busy ]] || die "port $TC_CTLD_PORT is already in use ($busy); another slurmctld? set TFSLURM_TC_CTLD_PORT"
    local port
    for port in "$(dbd_port)" "$(db_port)"; do
        busy=$(ss -Hltnp "sport = :$port" 2>/dev/null || true)
        [[ -z $busy ]] || die "port $port (slurmdbd's and its database's follow TFSLURM_TC_SLURMD_PORT) is already in use ($busy); another test cluster? set TFSLURM_TC_SLURMD_PORT"
    done
}

net_up() {
    local i node ns veth
    ip link add "$TC_BRIDGE" type bridge || die "cannot create bridge $TC_BRIDGE (CAP_NET_ADMIN and the bridge driver are needed)"
    ip addr add "$TC_NET.1/24" dev "$TC_BRIDGE"
    ip link set "$TC_BRIDGE" up
    # The "InfiniBand" network: a second bridge, no address on the host, no DNS name. Only
    # `tfslurm --iface ib0` (or --network) finds it.
    ip link add "$TC_IB_BRIDGE" type bridge || die "cannot create bridge $TC_IB_BRIDGE"
    ip link set "$TC_IB_BRIDGE" up
    for ((i = 1; i <= TC_NODES; i++)); do
        node=$(node_name "$i")
        ns=$(ns_name "$node")
        veth=$(veth_name "$node")
        ip netns add "$ns" || die "cannot create network namespace $ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns" || die "cannot create veth $veth"
        ip link set "$veth" master "$TC_BRIDGE" up
        ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
        ip link add "$(ib_veth_name "$node")" type veth peer name ib0 netns "$ns" ||
            die "cannot create veth $(ib_veth_name "$node")"
        ip link set "$(ib_veth_name "$node")" master "$TC_IB_BRIDGE" up
        ip -n "$ns" addr add "$(node_ib_addr "$i")/24" dev ib0
        # The IPv6 ULA beside it (nodad: usable at once, no duplicate detection to wait for).
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.ib0.disable_ipv6=0 >/dev/null 2>&1 || true
        ip -n "$ns" addr add "$(node_ib_addr6 "$i")/64" dev ib0 nodad ||
            die "cannot give $node's ib0 the IPv6 address $(node_ib_addr6 "$i") (IPv6 disabled?)"
        ip -n "$ns" link set ib0 up
    done
}

start_slurmctld() {
    local out=$TC_DIR/log/slurmctld.out clog=$TC_DIR/log/slurmctld.log i
    spawn "$out" "${TC_ENTER[@]}" slurmctld || die_log "$out" "slurmctld did not start (also see $clog)"
    for ((i = 0; i < TC_TIMEOUT * 10; i++)); do
        if daemon_pid slurmctld >/dev/null; then
            ctld_responding && return 0
        elif ((i > 20)); then
            die_log "$clog" "slurmctld exited during startup (also see $out)"
        fi
        sleep 0.1
    done
    die_log "$clog" "slurmctld did not answer 'scontrol ping' within ${TC_TIMEOUT} s"
}

start_slurmds() {
    local i node ns out hosts=$TC_DIR/etc/hosts
    for ((i = 1; i <= TC_NODES; i++)); do
        node=$(node_name "$i")
        ns=$(ns_name "$node")
        out=$TC_DIR/log/slurmd-$node.out
        # nsenter --net only (not 'ip netns exec', which remounts /sys and hides the cgroup
        # mounts slurmd needs); unshare gives the node its own host name and a private mount
        # namespace for its /etc/hosts (mount -n: no /run/mount/utab on the shared /run). Another
        # release's slurmd then enters its root filesystem from there (TC_ENTER), which binds
        # that /etc/hosts in turn.
        # shellcheck disable=SC2016 # expanded by sh inside the node
        spawn "$out" nsenter --net="/run/netns/$ns" -- \
            unshare --uts --mount --propagation private -- \
            sh -c 'echo "$1" >/proc/sys/kernel/hostname && mount -n --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
            sh "$node" "$hosts" "${TC_ENTER[@]}" slurmd -N "$node" ||
            die_log "$out" "slurmd for $node did not start (also see $TC_DIR/log/slurmd-$node.log)"
    done
    local pid nslink
    for ((i = 1; i <= TC_NODES; i++)); do
        node=$(node_name "$i")
        local n
        for ((n = 0; n < TC_TIMEOUT * 10; n++)); do
            pid=$(daemon_pid slurmd "$node") && break
            sleep 0.1
        done
        [[ -n $pid ]] || die_log "$TC_DIR/log/slurmd-$node.log" "slurmd for $node is not running (also see $TC_DIR/log/slurmd-$node.out)"
        nslink=$(readlink "/proc/$pid/ns/net")
        [[ $nslink == "net:[$(stat -L -c %i "/run/netns/$(ns_name "$node")")]" ]] ||
            die_log "$TC_DIR/log/slurmd-$node.log" "slurmd for $node (pid $pid) is not in network namespace $(ns_name "$node")"
        readlink "/proc/$pid/ns/uts" >"$TC_DIR/pid/$node.uts"
        readlink "/proc/$pid/ns/mnt" >"$TC_DIR/pid/$node.mnt"
        pid=
    done
}

wait_idle() {
    local i states line node state bad
    local -a nodes=()
    for ((i = 1; i <= TC_NODES; i++)); do
        nodes+=("$(node_name "$i")")
    done
    for ((i = 0; i < TC_TIMEOUT * 5; i++)); do
        states=$(node_states || true)
        bad=
        for node in "${nodes[@]}"; do
            line=$(grep -E "^$node " <<<"$states" || true)
            state=${line#* }
            [[ $state == idle ]] || bad+="$node:${state:-missing} "
        done
        [[ -z $bad ]] && return 0
        for node in "${nodes[@]}"; do
            daemon_pid slurmd "$node" >/dev/null ||
                die_log "$TC_DIR/log/slurmd-$node.log" "slurmd for $node died during startup"
        done
        sleep 0.2
    done
    local reasons
    reasons=$(sctl scontrol show node -o 2>/dev/null | grep -o 'NodeName=[^ ]*\|State=[^ ]*\|Reason=.*' || true)
    printf '%s\n' "$reasons" >&2
    local worst=${bad%%:*}
    die_log "$TC_DIR/log/slurmd-$worst.log" "nodes not idle after ${TC_TIMEOUT} s: ${bad% } (slurmctld: $TC_DIR/log/slurmctld.log)"
}

# job_wait JOBID SECONDS: poll scontrol (SLURM_CONF must be set) until the job ends, reading
# its ExitCode before the record is purged (MinJobAge). Status: the job's exit code, 128 + the
# signal if it was signalled, 1 if it ended abnormally without either, 124 (after scancel) on
# timeout, 125 if the record vanished. JOB_STATE holds the last state seen.
job_wait() {
    local jid=$1 secs=$2 info code sig i
    JOB_STATE=
    for ((i = 0; i < secs * 5; i++)); do
        if info=$(timeout 10 scontrol show job -o "$jid" 2>&1); then
            [[ $info =~ (^|[[:space:]])JobState=([A-Z_]+) ]] && JOB_STATE=${BASH_REMATCH[2]}
        elif [[ $info == *"Invalid job id"* ]]; then
            return 125
        fi
        case $JOB_STATE in
        PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | REQUEUE_HOLD | REQUEUE_FED | RESIZING | SIGNALING | STAGE_OUT | '') ;;
        *)
            [[ $info =~ (^|[[:space:]])ExitCode=([0-9]+):([0-9]+) ]] || return 1
            code=${BASH_REMATCH[2]}
            sig=${BASH_REMATCH[3]}
            ((sig == 0)) || return $((128 + sig))
            [[ $JOB_STATE == COMPLETED || $code != 0 ]] || return 1
            return "$code"
            ;;
        esac
        sleep 0.2
    done
    timeout 10 scancel "$jid" 2>/dev/null || true
    return 124
}

# warm_up: run one tiny batch job. slurmctld applies SchedulerParameters (batch_sched_delay=0)
# only in its first scheduling pass, which for batch jobs comes 3 s after it started; without
# this, the first batch job of every test run would wait those 3 s.
warm_up() {
    local -x SLURM_CONF
    SLURM_CONF=$(conf_path)
    local jid rc=0
    jid=$(timeout 20 sbatch --parsable -N1 -n1 -J tc-warmup -o /dev/null --wrap true 2>&1) ||
        die_log "$TC_DIR/log/slurmctld.log" "the warm-up batch job could not be submitted: $jid"
    jid=${jid%%;*}
    job_wait "$jid" "$TC_TIMEOUT" || rc=$?
    ((rc == 0)) || die_log "$TC_DIR/log/slurmctld.log" \
        "the warm-up batch job $jid did not complete within ${TC_TIMEOUT} s (exit $rc; also see $TC_DIR/log/slurmd-$(node_name 1).log)"
}

bring_up() {
    local dir=$TC_DIR
    mkdir -p -- "$dir"
    : >"$dir/$k_marker"
    chmod 755 -- "$dir"
    if [[ -d /run/netns ]]; then
        TC_NETNS_CREATED=0
    else
        TC_NETNS_CREATED=1
        : >"$k_netns_marker"
    fi
    mkdir -p -- "$dir"/{etc/plugstack.conf.d,munge/key,munge/run,spool/ctld,pid,log,dev,tmp}
    local i
    for ((i = 1; i <= TC_NODES; i++)); do
        mkdir -p -- "$dir/spool/d/$(node_name "$i")"
    done
    chmod 755 -- "$dir/munge" "$dir/munge/run"
    chmod 700 -- "$dir/munge/key"
    chmod 1777 -- "$dir/tmp"
    write_settings
    write_configs
    write_client_wrappers
    release_init
    start_munged
    start_accounting
    net_up
    start_slurmctld
    start_slurmds
    wait_idle
    warm_up
}

cmd_up() {
    parse_slurm_option up "$@"
    need_root
    local t0
    t0=$(now_us)
    load_requested
    validate
    take_lock
    ensure_packages
    ensure_rootfs
    if [[ -f $TC_DIR/settings ]]; then
        if recorded_matches_env && (load_recorded && check_health 0); then
            log "already up and healthy in $TC_DIR; nothing to do"
            return 0
        fi
        log "taking down the stale or different test cluster in $TC_DIR first"
    fi
    do_down 1
    load_requested
    validate
    preflight
    log "starting: Slurm $TC_SLURM${TC_ROOTFS:+ from $TC_ROOTFS}, $TC_NODES nodes x $TC_CPUS CPUs, $TC_GPUS GPUs, state in $TC_DIR"
    bring_up
    log "up in $(elapsed "$t0") s: nodes $(hostlist_of "$TC_NODE_PREFIX" "$TC_NODES") idle on $TC_BRIDGE ($TC_NET.0/24)"
    local prefix=
    [[ $TC_DIR == "$k_default_dir" ]] || prefix="TFSLURM_TC_DIR=$TC_DIR "
    log "use it with: eval \"\$($prefix$script_path env)\""
}
