# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster (sourced by it; not run on its own): messages, the
# TFSLURM_TC_* settings (requested, validated, recorded) and the names derived from them.

# Messages

# log, warn and die: scripts/lib/messages.sh (sourced by scripts/test-cluster).
# die_log LOGFILE MESSAGE: fail, name the log to read and show its last lines.
die_log() {
    local file=$1
    shift
    printf '%s: error: %s\n' "$prog" "$*" >&2
    if [[ -s $file ]]; then
        printf '%s: read %s; its last lines:\n' "$prog" "$file" >&2
        tail -n 25 -- "$file" | sed 's/^/    /' >&2
    else
        printf '%s: read %s (empty or missing)\n' "$prog" "$file" >&2
    fi
    printf '%s: all logs: %s/log/; clean up with: %s down\n' "$prog" "$TC_DIR" "$script_path" >&2
    exit 1
}

# now_us: monotonic-enough wall clock in microseconds (for durations).
now_us() { printf '%s' "${EPOCHREALTIME/./}"; }
# elapsed START_US: seconds since START_US with one decimal.
elapsed() {
    local d=$(($(now_us) - $1))
    printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10))
}


# ---------------------------------------------------------------------------------------------
# Settings

# load_requested: TC_* from the environment and the defaults.
load_requested() {
    TC_DIR=${TFSLURM_TC_DIR:-$k_default_dir}
    local key var
    for key in "${k_keys[@]}"; do
        var=TFSLURM_TC_$key
        printf -v "TC_$key" '%s' "${!var-${k_defaults[$key]}}"
    done
    for key in "${!k_fixed[@]}"; do
        printf -v "TC_$key" '%s' "${k_fixed[$key]}"
    done
    TC_HOST=$(short_hostname)
    TC_NETNS_CREATED=0
    # The release: --slurm (cmd_up), else TFSLURM_TC_SLURM, else the machine's own.
    TC_SLURM_FROM=${TC_SLURM_FROM:-TFSLURM_TC_SLURM}
    if [[ -z $TC_SLURM ]]; then
        TC_SLURM=$(host_release)
        [[ -n $TC_SLURM ]] ||
            die "this machine's Debian suite packages no Slurm release this script knows; choose one with --slurm (${k_releases[*]})"
    fi
    TC_ROOTFS=
    TC_ENTER=()
}

# load_recorded: TC_* from the settings file of a cluster that 'up' started (if any).
# Returns 1 when there is none.
load_recorded() {
    local file=$TC_DIR/settings
    [[ -f $file ]] || return 1
    [[ $(stat -c %u -- "$file") == 0 ]] || die "$file is not owned by root; refusing to read it"
    # shellcheck source=/dev/null
    source "$file"
    release_init
}

# load_settings: the recorded settings if there are any, else the requested ones.
load_settings() {
    load_requested
    load_recorded || true
}

# write_settings: record what 'up' used, as shell assignments.
write_settings() {
    local key var
    {
        printf '# tfslurm test cluster settings, written by scripts/test-cluster up\n'
        printf 'TC_FORMAT=1\n'
        for key in "${k_keys[@]}" "${!k_fixed[@]}"; do
            var=TC_$key
            printf 'TC_%s=%q\n' "$key" "${!var}"
        done
        printf 'TC_HOST=%q\n' "$TC_HOST"
        printf 'TC_NETNS_CREATED=%q\n' "$TC_NETNS_CREATED"
        printf 'TC_ROOTFS=%q\n' "$TC_ROOTFS"
    } >"$TC_DIR/settings"
}

# recorded_matches_env: every TFSLURM_TC_* variable set by the caller equals the recorded value.
recorded_matches_env() {
    (
        load_recorded || exit 1
        for key in "${k_keys[@]}"; do
            [[ $key != TIMEOUT ]] || continue # how long 'up' waits, not a property of the cluster
            var=TFSLURM_TC_$key
            tc=TC_$key
            if [[ -n ${!var+set} && ${!var} != "${!tc}" ]]; then
                log "TFSLURM_TC_$key=${!var} differs from the running cluster's ${!tc}"
                exit 1
            fi
        done
    )
}

short_hostname() {
    local name
    name=$(uname -n)
    printf '%s' "${name%%.*}"
}

# is_uint VALUE: a decimal number without leading zeros (bash reads 08 as octal).
is_uint() { [[ $1 =~ ^(0|[1-9][0-9]{0,8})$ ]]; }

# check_range NAME VALUE MIN MAX
check_range() {
    if ! is_uint "$2" || (($2 < $3 || $2 > $4)); then
        die "TFSLURM_TC_$1: expected an integer in [$3, $4]: \"$2\""
    fi
}

validate_dir() {
    [[ $TC_DIR =~ ^/[A-Za-z0-9._/-]+$ && $TC_DIR != *..* ]] ||
        die "TFSLURM_TC_DIR: expected an absolute path of [A-Za-z0-9._/-]: \"$TC_DIR\""
    TC_DIR=${TC_DIR%/}
    local parent=${TC_DIR%/*}
    [[ -n $parent ]] || die "TFSLURM_TC_DIR: refusing a top-level directory: \"$TC_DIR\""
    case $TC_DIR in
    /bin | /boot | /dev | /etc | /home | /lib* | /opt | /proc | /root | /run | /run/netns | /sbin | /srv | /sys | /tmp | /usr* | /var)
        die "TFSLURM_TC_DIR: refusing a system directory: \"$TC_DIR\""
        ;;
    esac
}

validate() {
    validate_dir
    validate_release
    local key var
    for key in "${!k_fixed[@]}"; do
        var=TFSLURM_TC_$key
        [[ -z ${!var+set} ]] ||
            die "TFSLURM_TC_$key: not a setting any more; every test cluster has ${k_fixed[$key]} (docs/test-cluster.md, \"Settings\")"
    done
    check_range NODES "$TC_NODES" 1 99
    check_range CPUS "$TC_CPUS" 1 1024
    check_range GPUS "$TC_GPUS" 0 64
    check_range CTLD_PORT "$TC_CTLD_PORT" 1 65535
    check_range SLURMD_PORT "$TC_SLURMD_PORT" 1 65535
    check_range TIMEOUT "$TC_TIMEOUT" 1 3600
    local net
    for key in NET IB_NET; do
        net=TC_$key
        if ! [[ ${!net} =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
            ((BASH_REMATCH[1] > 255 || BASH_REMATCH[2] > 255 || BASH_REMATCH[3] > 255)); then
            die "TFSLURM_TC_$key: expected the first three octets of a /24, e.g. 10.77.0: \"${!net}\""
        fi
    done
    [[ $TC_NET != "$TC_IB_NET" ]] || die "TFSLURM_TC_IB_NET: must differ from TFSLURM_TC_NET: \"$TC_IB_NET\""
    [[ $TC_BRIDGE =~ ^[A-Za-z0-9_.-]{1,15}$ ]] ||
        die "TFSLURM_TC_BRIDGE: expected 1-15 characters of [A-Za-z0-9_.-]: \"$TC_BRIDGE\""
    [[ $TC_IB_BRIDGE =~ ^[A-Za-z0-9_.-]{1,15}$ && $TC_IB_BRIDGE != "$TC_BRIDGE" ]] ||
        die "TFSLURM_TC_IB_BRIDGE: expected 1-15 characters of [A-Za-z0-9_.-], not the bridge's name: \"$TC_IB_BRIDGE\""
    [[ $TC_NODE_PREFIX =~ ^[a-z][a-z_-]*$ ]] ||
        die "TFSLURM_TC_NODE_PREFIX: expected lower-case letters, '_' or '-': \"$TC_NODE_PREFIX\""
    [[ $TC_NS_PREFIX =~ ^[A-Za-z0-9_.-]+$ ]] ||
        die "TFSLURM_TC_NS_PREFIX: expected [A-Za-z0-9_.-]: \"$TC_NS_PREFIX\""
    [[ $TC_VETH_PREFIX =~ ^[A-Za-z0-9_.-]+$ ]] ||
        die "TFSLURM_TC_VETH_PREFIX: expected [A-Za-z0-9_.-]: \"$TC_VETH_PREFIX\""
    [[ $TC_CLUSTER =~ ^[a-z][a-z0-9_]{0,39}$ ]] ||
        die "TFSLURM_TC_CLUSTER: expected a lower-case name: \"$TC_CLUSTER\""
    local longest=$TC_NODE_PREFIX$TC_NODES
    ((${#TC_VETH_PREFIX} + ${#longest} + 1 <= 15)) ||
        die "TFSLURM_TC_VETH_PREFIX: \"$TC_VETH_PREFIX${longest}i\" is longer than 15 characters"
    [[ ! $TC_HOST =~ ^${TC_NODE_PREFIX}[0-9]+$ ]] ||
        die "this machine is called \"$TC_HOST\", which clashes with the node names; set TFSLURM_TC_NODE_PREFIX"
    # slurmd's step sockets: <dir>/spool/d/<node>/<node>_<job>.<step>
    local sock=$TC_DIR/spool/d/$longest/${longest}_$k_max_ids
    ((${#sock} <= k_max_sock)) ||
        die "TFSLURM_TC_DIR is too deep: slurmd socket paths such as $sock (${#sock} bytes) exceed $k_max_sock bytes; use a shorter directory"
    release_init
}

# Derived names.
node_name() { printf '%s%d' "$TC_NODE_PREFIX" "$1"; }
node_addr() { printf '%s.%d' "$TC_NET" $((10 + $1)); }
ns_name() { printf '%s%s' "$TC_NS_PREFIX" "$1"; }
veth_name() { printf '%s%s' "$TC_VETH_PREFIX" "$1"; }
node_ib_addr() { printf '%s.%d' "$TC_IB_NET" $((10 + $1)); }
node_ib_addr6() { printf '%s%d' "$TC_IB_NET6" $((10 + $1)); }
ib_veth_name() { printf '%s%si' "$TC_VETH_PREFIX" "$1"; }
conf_path() { printf '%s/etc/slurm.conf' "$TC_DIR"; }
# Accounting: slurmdbd listens on the port after slurmd's, its MariaDB (the host's, whatever
# the release) on the next one, both on 127.0.0.1 only.
dbd_port() { printf '%d' $((TC_SLURMD_PORT + 1)); }
db_port() { printf '%d' $((TC_SLURMD_PORT + 2)); }
db_dir() { printf '%s/db' "$TC_DIR"; }
munge_socket() { printf '%s/munge/run/munge.socket' "$TC_DIR"; }
# hostlist_of PREFIX COUNT: n1 or n[1-3]
hostlist_of() {
    if (($2 == 1)); then
        printf '%s1' "$1"
    else
        printf '%s[1-%d]' "$1" "$2"
    fi
}
