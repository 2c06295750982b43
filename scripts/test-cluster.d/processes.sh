# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: finding, describing and stopping processes through /proc,
# starting daemons with a clean environment, the up/down lock, and bounded Slurm client calls.

# Processes

# pid_alive PID: the process exists and is not a zombie (killed daemons may linger as zombies
# until PID 1 reaps them).
pid_alive() {
    local line state
    read -r line 2>/dev/null </proc/"$1"/stat || return 1
    state=${line##*) }
    state=${state%% *}
    [[ $state != Z && $state != X && $state != x ]]
}

pid_comm() {
    local comm=
    read -r comm 2>/dev/null </proc/"$1"/comm || true
    printf '%s' "$comm"
}

# pid_has_arg PID ARG: ARG is one of the process's command-line arguments.
pid_has_arg() { grep -qzxF -- "$2" /proc/"$1"/cmdline 2>/dev/null; }

# pid_has_env PID NAME=VALUE: the process's environment contains exactly that entry.
pid_has_env() { grep -qzxF -- "$2" /proc/"$1"/environ 2>/dev/null; }

# read_pidfile FILE: print the PID in FILE, if it is a number.
read_pidfile() {
    local pid=
    [[ -r $1 ]] || return 1
    read -r pid <"$1" || true
    is_uint "$pid" || return 1
    printf '%s' "$pid"
}

# daemon_pid munged|slurmctld|slurmd NODE: print the PID of our running daemon, verified
# through /proc (name and this cluster's SLURM_CONF or socket), never trusting a PID file alone.
daemon_pid() {
    local what=$1 pid
    case $what in
    munged)
        pid=$(read_pidfile "$TC_DIR/munge/run/munged.pid") || return 1
        pid_alive "$pid" && [[ $(pid_comm "$pid") == munged ]] &&
            pid_has_arg "$pid" "--socket=$(munge_socket)" || return 1
        ;;
    slurmctld)
        pid=$(read_pidfile "$TC_DIR/pid/slurmctld.pid") || return 1
        pid_alive "$pid" && [[ $(pid_comm "$pid") == slurmctld* ]] &&
            pid_has_env "$pid" "SLURM_CONF=$(conf_path)" || return 1
        ;;
    slurmdbd)
        pid=$(read_pidfile "$TC_DIR/pid/slurmdbd.pid") || return 1
        pid_alive "$pid" && [[ $(pid_comm "$pid") == slurmdbd* ]] &&
            pid_has_env "$pid" "SLURM_CONF=$(conf_path)" || return 1
        ;;
    mariadbd)
        pid=$(read_pidfile "$(db_dir)/mariadbd.pid") || return 1
        pid_alive "$pid" && [[ $(pid_comm "$pid") == mariadbd ]] &&
            pid_has_arg "$pid" "--datadir=$(db_dir)/data" || return 1
        ;;
    slurmd)
        pid=$(read_pidfile "$TC_DIR/pid/slurmd-$2.pid") || return 1
        pid_alive "$pid" && [[ $(pid_comm "$pid") == slurmd* ]] &&
            pid_has_env "$pid" "SLURM_CONF=$(conf_path)" && pid_has_arg "$pid" "$2" || return 1
        ;;
    *) return 1 ;;
    esac
    printf '%s' "$pid"
}

# env_procs NAME=VALUE: "PID COMM" of the live processes whose environment holds exactly that
# entry (one grep over /proc).
env_procs() {
    local file pid
    while IFS= read -r file; do
        pid=${file#/proc/}
        pid=${pid%/environ}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        pid_alive "$pid" || continue
        printf '%s %s\n' "$pid" "$(pid_comm "$pid")"
    done < <(grep -lzxF -- "$1" /proc/[0-9]*/environ 2>/dev/null || true)
}

# pids_with_env NAME=VALUE COMM...: PIDs whose environment holds the entry and whose command
# name is one of COMM.
pids_with_env() {
    local entry=$1 pid comm want
    shift
    while read -r pid comm; do
        for want in "$@"; do
            if [[ $comm == "$want" ]]; then
                printf '%s\n' "$pid"
                break
            fi
        done
    done < <(env_procs "$entry")
}

# pids_with_arg ARG: PIDs with ARG among their command-line arguments.
pids_with_arg() {
    local file pid
    while IFS= read -r file; do
        pid=${file#/proc/}
        pid=${pid%/cmdline}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        pid_alive "$pid" && printf '%s\n' "$pid"
    done < <(grep -lzxF -- "$1" /proc/[0-9]*/cmdline 2>/dev/null || true)
}

# pids_in_ns KIND LINK: PIDs whose /proc/PID/ns/KIND points to LINK (e.g. uts:[4026532300]).
pids_in_ns() {
    local kind=$1 link=$2 path pid
    [[ $link =~ ^[a-z]+:\[([0-9]+)\]$ ]] || return 0
    # find -lname takes a glob: '?' stands for the brackets around the inode number.
    local pattern="$kind:?${BASH_REMATCH[1]}?"
    while IFS= read -r path; do
        pid=${path#/proc/}
        pid=${pid%%/*}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        pid_alive "$pid" && printf '%s\n' "$pid"
    done < <(find /proc/[0-9]*/ns/"$kind" -maxdepth 0 -lname "$pattern" 2>/dev/null || true)
}

# kill_pids GRACE PID...: SIGTERM, wait up to GRACE seconds, then SIGKILL. Returns 1 if
# something survives.
kill_pids() {
    local grace=$1 pid
    shift
    local -a live=()
    for pid in "$@"; do
        [[ $pid != "$$" ]] && pid_alive "$pid" && live+=("$pid")
    done
    ((${#live[@]} > 0)) || return 0
    kill -TERM "${live[@]}" 2>/dev/null || true
    kill -CONT "${live[@]}" 2>/dev/null || true
    mapfile -t live < <(still_alive_after $((grace * 10 + 1)) "${live[@]}")
    ((${#live[@]} > 0)) || return 0
    kill -KILL "${live[@]}" 2>/dev/null || true
    mapfile -t live < <(still_alive_after 50 "${live[@]}")
    ((${#live[@]} > 0)) || return 0
    warn "still alive after SIGKILL: ${live[*]}"
    return 1
}

# still_alive_after TENTHS PID...: wait until the processes are gone, looking every tenth of a
# second, TENTHS times at most; print those still alive then.
still_alive_after() {
    local tenths=$1 pid i
    shift
    local -a live=("$@") still=()
    for ((i = 0; i < tenths; i++)); do
        still=()
        for pid in "${live[@]}"; do
            pid_alive "$pid" && still+=("$pid")
        done
        ((${#still[@]} > 0)) || return 0
        live=("${still[@]}")
        sleep 0.1
    done
    printf '%s\n' "${live[@]}"
}

# uniq_pids ARRAY_NAME: sort the PIDs in the named array and drop duplicates.
uniq_pids() {
    local -n uniq_ref=$1
    ((${#uniq_ref[@]} > 0)) || return 0
    mapfile -t uniq_ref < <(printf '%s\n' "${uniq_ref[@]}" | sort -u -n)
}

# minus_pids ARRAY_NAME OTHER...: drop from the named array the PIDs listed in OTHER.
minus_pids() {
    local -n minus_ref=$1
    shift
    local -A other=()
    local pid
    for pid in "$@"; do
        other[$pid]=1
    done
    local -a kept=()
    for pid in "${minus_ref[@]}"; do
        [[ -n ${other[$pid]:-} ]] || kept+=("$pid")
    done
    minus_ref=("${kept[@]}")
}

# describe_pids PID...: "1234(slurmd) 1240(sleep)"
describe_pids() {
    local pid out=
    for pid in "$@"; do
        out+="$pid($(pid_comm "$pid")) "
    done
    printf '%s' "${out% }"
}

# spawn OUTFILE CMD...: run CMD (a daemon that forks into the background) with a minimal
# environment, stdin from /dev/null, stdout/stderr appended to OUTFILE and every other file
# descriptor closed, so that no daemon keeps a pipe of the caller (ctest) or our lock open.
spawn() {
    local out=$1
    shift
    (
        cd -- "$TC_DIR/log"
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            if is_uint "$fd" && ((fd > 2)); then
                eval "exec ${fd}>&-" 2>/dev/null || true
            fi
        done
        exec env -i PATH="$k_path" LANG=C.UTF-8 HOME=/root SLURM_CONF="$(conf_path)" \
            "$@" </dev/null >>"$out" 2>&1
    )
}

take_lock() {
    # The lock is on this script file (read-only), so nothing is left behind; daemons never
    # inherit the descriptor (spawn closes it).
    exec {lock_fd}<"$script_path"
    if ! flock -w 300 "$lock_fd"; then
        die "another 'test-cluster up/down' has held the lock on $script_path for 300 s"
    fi
}

need_root() {
    (($(id -u) == 0)) || die "the test cluster needs root (namespaces, bridge, daemons); run it with sudo"
}

# ---------------------------------------------------------------------------------------------
# Slurm client helpers (always bounded)

sctl() { SLURM_CONF=$(conf_path) timeout -k 2 10 "$@"; }

ctld_responding() {
    local out
    out=$(sctl scontrol ping 2>/dev/null) || return 1
    [[ $out == *"is UP"* ]]
}

# node_states: "n1 idle" lines from sinfo.
node_states() { sctl sinfo -h -N -o '%N %t' 2>/dev/null | sort -u; }
