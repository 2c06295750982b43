# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: "smoke", nine checks that the cluster does what the
# end-to-end tests rely on (srun, sbatch, SPANK, PMI2, GPUs, TCP, reserved ports).

# smoke

# smoke_run SECONDS CMD...: run a Slurm command bounded; stdout in $s_out, stderr in $s_err,
# status in $s_rc.
smoke_run() {
    local secs=$1
    shift
    s_cmd="$*"
    s_rc=0
    s_out=$(timeout -k 5 "$secs" "$@" 2>"$s_work/stderr") || s_rc=$?
    s_err=$(<"$s_work/stderr")
    ((s_rc != 124 && s_rc != 137)) || s_err+=$'\n'"(timed out after $secs s)"
    return 0
}

# smoke_batch NAME OUTPUT DESCRIPTION SBATCH_ARGS...: submit a batch job (sbatch --parsable -o
# OUTPUT ...) and wait for it; then $jid is the job, $s_rc its exit code, $s_out its output and
# $s_cmd DESCRIPTION. A failed submission is NAME's failure, and returns 1.
smoke_batch() {
    local name=$1 output=$2 description=$3
    shift 3
    smoke_run 30 sbatch --parsable -o "$output" "$@"
    jid=${s_out%%;*}
    if ((s_rc != 0)) || ! is_uint "$jid"; then
        smoke_result fail "$name" "submission failed"
        return 1
    fi
    s_rc=0
    job_wait "$jid" 60 || s_rc=$?
    s_cmd="$description (job $jid)"
    s_out=$(cat "$output" 2>/dev/null || true)
}

s_pass=0
s_fail=0
s_skip=0
s_num=0
smoke_result() { # pass|fail|skip NAME DETAIL
    s_num=$((s_num + 1))
    case $1 in
    pass)
        s_pass=$((s_pass + 1))
        printf 'PASS %d %s: %s\n' "$s_num" "$2" "$3"
        ;;
    skip)
        s_skip=$((s_skip + 1))
        printf 'SKIP %d %s: %s\n' "$s_num" "$2" "$3"
        ;;
    *)
        s_fail=$((s_fail + 1))
        printf 'FAIL %d %s: %s\n' "$s_num" "$2" "$3"
        {
            printf '    command: %s (exit %s)\n' "${s_cmd:-}" "${s_rc:-?}"
            [[ -z ${s_out:-} ]] || printf '%s\n' "$s_out" | head -n 30 | sed 's/^/    stdout: /'
            [[ -z ${s_err:-} ]] || printf '%s\n' "$s_err" | tail -n 20 | sed 's/^/    stderr: /'
            printf '    logs: %s/log/slurmctld.log, %s/log/slurmd-<node>.log\n' "$TC_DIR" "$TC_DIR"
        }
        ;;
    esac
}

# smoke_expect_lines NAME EXPECTED DETAIL: compare sorted $s_out with EXPECTED (sorted).
smoke_expect_lines() {
    local got want
    got=$(sort <<<"$s_out")
    want=$(sort <<<"$2")
    if ((s_rc == 0)) && [[ $got == "$want" ]]; then
        smoke_result pass "$1" "$3"
    else
        s_err+=$'\n'"expected (sorted):"$'\n'"$want"
        smoke_result fail "$1" "unexpected output"
    fi
}

cmd_smoke() {
    need_root
    require_recorded
    check_health 0 || {
        check_health 1 >&2 || true
        die "the test cluster is not healthy; run: $script_path up"
    }
    local t0
    t0=$(now_us)
    export SLURM_CONF
    SLURM_CONF=$(conf_path)
    s_work=$(mktemp -d "$TC_DIR/tmp/smoke.XXXXXX")
    chmod 755 "$s_work"
    local plug_conf=$TC_DIR/etc/plugstack.conf.d/tc-smoke-$$.conf
    # shellcheck disable=SC2064 # expand now: the paths are fixed
    trap "rm -f -- '$plug_conf'; rm -rf -- '$s_work'" EXIT
    trap 'exit 130' INT TERM

    local n=$TC_NODES tpn=2 r i node
    ((TC_CPUS >= 2)) || tpn=1
    local ntasks=$((n * tpn))
    local nodelist tpn_str
    nodelist=$(hostlist_of "$TC_NODE_PREFIX" "$n")
    if ((n == 1)); then tpn_str=$tpn; else tpn_str="$tpn(x$n)"; fi
    local -a layout=()
    for ((r = 0; r < ntasks; r++)); do
        layout+=("$(node_name $((r / tpn + 1)))")
    done
    local -a shape=(-N"$n" --ntasks-per-node="$tpn")
    local python=python3
    [[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
    local want

    # 1. layout
    smoke_run 60 srun "${shape[@]}" -l hostname
    local got
    got=$(sort -n -t: -k1,1 <<<"$s_out" | sed 's/^[0-9]*: //' | tr '\n' ' ')
    if ((s_rc == 0)) && [[ ${got% } == "${layout[*]}" ]]; then
        smoke_result pass "srun layout" "srun ${shape[*]} hostname -> ${got% }"
    else
        s_err+=$'\n'"expected by rank: ${layout[*]}"
        smoke_result fail "srun layout" "srun ${shape[*]} hostname"
    fi

    # 2. task environment
    # shellcheck disable=SC2016 # expanded by the tasks
    smoke_run 60 srun "${shape[@]}" bash -c 'echo "$SLURM_PROCID $SLURM_NODEID $SLURM_LOCALID $SLURMD_NODENAME $(cat /proc/sys/kernel/hostname) $SLURM_STEP_NODELIST $SLURM_STEP_TASKS_PER_NODE $SLURM_STEP_NUM_TASKS $SLURM_STEP_NUM_NODES $SLURM_CLUSTER_NAME"'
    want=
    for ((r = 0; r < ntasks; r++)); do
        node=${layout[r]}
        want+="$r $((r / tpn)) $((r % tpn)) $node $node $nodelist $tpn_str $ntasks $n $TC_CLUSTER"$'\n'
    done
    smoke_expect_lines "task environment" "${want%$'\n'}" \
        "PROCID/NODEID/LOCALID/SLURMD_NODENAME/STEP_NODELIST=$nodelist/STEP_TASKS_PER_NODE=$tpn_str for $ntasks tasks"

    # 3. sbatch (own polling; the batch script's exit code must come back)
    local jid
    if smoke_batch sbatch "$s_work/batch.out" "sbatch ..." "${shape[@]}" -J tc-smoke \
        --wrap "srun hostname | sort -V | tr '\\n' ' '; exit 7"; then
        want=$(printf '%s ' "${layout[@]}")
        if ((s_rc == 7)) && [[ $s_out == "$want" ]]; then
            smoke_result pass "sbatch" "job $jid ran srun on ${layout[*]} and exited 7 as its script did"
        else
            s_err="expected exit 7 and output '$want'"
            smoke_result fail "sbatch" "job $jid: exit $s_rc"
        fi
    fi

    # 4./5. SPANK plugin through srun and sbatch
    local so=$s_work/tc_smoke.so spank_ok=1
    if ! s_err=$(cp -- "$smoke_dir/tc_smoke.c" "$s_work/tc_smoke.c" 2>&1 &&
        "${TC_ENTER[@]}" gcc -shared -fPIC -O2 -Wall -o "$so" "$s_work/tc_smoke.c" 2>&1); then
        s_cmd="gcc -shared -fPIC tc_smoke.c"
        s_rc=1
        s_out=
        smoke_result fail "spank srun" "cannot build the plugin (libslurm-dev installed?)"
        smoke_result fail "spank sbatch" "cannot build the plugin"
        spank_ok=0
    fi
    if ((spank_ok)); then
        printf 'optional %s\n' "$so" >"$plug_conf"
        smoke_run 60 srun -N"$n" --ntasks-per-node=1 --tc-smoke=bob printenv TC_SMOKE
        want=
        for ((r = 0; r < n; r++)); do
            want+="bob:$r"$'\n'
        done
        local pass_srun=0 unset_out
        if ((s_rc == 0)) && [[ $(sort <<<"$s_out") == "$(sort <<<"${want%$'\n'}")" ]]; then
            pass_srun=1
        fi
        local saved_out=$s_out saved_err=$s_err saved_rc=$s_rc
        # shellcheck disable=SC2016 # expanded by the task
        smoke_run 60 srun -N1 -n1 bash -c 'echo "${TC_SMOKE-unset}"'
        unset_out=$s_out
        if ((pass_srun)) && [[ $unset_out == unset ]]; then
            smoke_result pass "spank srun" "--tc-smoke=bob -> TC_SMOKE=bob:<rank> in $n tasks; unset without the option"
        else
            s_out=$saved_out$'\n'"(without the option: $unset_out)"
            s_err=$saved_err
            s_rc=$saved_rc
            s_cmd="srun -N$n --ntasks-per-node=1 --tc-smoke=bob printenv TC_SMOKE"
            smoke_result fail "spank srun" "expected TC_SMOKE=bob:<rank> in every task"
        fi

        if smoke_batch "spank sbatch" "$s_work/spank.out" "sbatch --tc-smoke=fromsbatch ..." \
            -N"$n" --ntasks-per-node=1 --tc-smoke=fromsbatch --wrap 'srun printenv TC_SMOKE'; then
            want=
            for ((r = 0; r < n; r++)); do
                want+="fromsbatch:$r"$'\n'
            done
            s_err=
            smoke_expect_lines "spank sbatch" "${want%$'\n'}" \
                "job $jid: sbatch --tc-smoke=fromsbatch -> TC_SMOKE=fromsbatch:<rank> in the inner srun"
        fi
        rm -f -- "$plug_conf"
    fi

    # 6. PMI2
    if ! s_err=$(cp -- "$smoke_dir/pmi2.c" "$s_work/pmi2.c" 2>&1 &&
        "${TC_ENTER[@]}" gcc -O2 -Wall -o "$s_work/pmi2" "$s_work/pmi2.c" -lpmi2 2>&1); then
        s_cmd="gcc pmi2.c -lpmi2"
        s_rc=1
        s_out=
        smoke_result fail "pmi2" "cannot build the PMI2 program (libpmi2-0-dev installed?)"
    else
        smoke_run 60 srun --mpi=pmi2 "${shape[@]}" "$s_work/pmi2"
        want=
        local peers
        peers=$(
            IFS=,
            printf '%s' "${layout[*]}"
        )
        for ((r = 0; r < ntasks; r++)); do
            want+="pmi2 rank=$r size=$ntasks peers=$peers"$'\n'
        done
        smoke_expect_lines "pmi2" "${want%$'\n'}" "put/fence/get across $ntasks ranks: $peers"
    fi

    # 7. GPUs
    if ((TC_GPUS < 2 || TC_GPUS < tpn)); then
        smoke_result skip "gpus" "needs at least 2 GPUs per node (TFSLURM_TC_GPUS=$TC_GPUS)"
    else
        # shellcheck disable=SC2016 # expanded by the tasks
        local gpu_probe='echo "$SLURMD_NODENAME $SLURM_LOCALID $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS $SLURM_GPUS_ON_NODE"'
        smoke_run 60 srun "${shape[@]}" --gpus-per-node=2 bash -c "$gpu_probe"
        want=
        for ((r = 0; r < ntasks; r++)); do
            want+="${layout[r]} $((r % tpn)) 0,1 0,1 2"$'\n'
        done
        local gpn_out=$s_out gpn_ok=0
        [[ $s_rc == 0 && $(sort <<<"$s_out") == "$(sort <<<"${want%$'\n'}")" ]] && gpn_ok=1
        if ((gpn_ok)); then
            smoke_run 60 srun "${shape[@]}" --gpus-per-task=1 bash -c "$gpu_probe"
            want=
            for ((r = 0; r < ntasks; r++)); do
                want+="${layout[r]} $((r % tpn)) $((r % tpn)) $((r % tpn)) $tpn"$'\n'
            done
            smoke_expect_lines "gpus" "${want%$'\n'}" \
                "--gpus-per-node=2 -> CUDA_VISIBLE_DEVICES=0,1; --gpus-per-task=1 -> one GPU per task (LOCALID)"
        else
            s_out=$gpn_out
            s_err+=$'\n'"expected (sorted):"$'\n'"$(sort <<<"${want%$'\n'}")"
            smoke_result fail "gpus" "--gpus-per-node=2"
        fi
    fi

    # 8. cross-node TCP by host name
    if ((n < 2)); then
        smoke_result skip "tcp" "needs at least 2 nodes"
    elif ! s_err=$(cp -- "$smoke_dir/tcp.py" "$s_work/tcp.py" 2>&1); then
        s_cmd="cp $smoke_dir/tcp.py"
        s_rc=1
        s_out=
        smoke_result fail "tcp" "the TCP smoke program is missing"
    else
        mkdir -p "$s_work/tcp"
        smoke_run 60 srun -N2 --ntasks-per-node=1 "$python" "$s_work/tcp.py" "$s_work/tcp"
        # Slurm picks the two nodes (a node still completing the previous step is skipped);
        # the expected lines follow from the names the tasks report.
        local srv cli a_srv='' a_cli=''
        srv=$(sed -n 's/^server \([^ ]*\) .*/\1/p' <<<"$s_out")
        cli=$(sed -n 's/^client \([^ ]*\) .*/\1/p' <<<"$s_out")
        [[ $srv =~ ^${TC_NODE_PREFIX}([0-9]+)$ ]] && a_srv=$(node_addr "${BASH_REMATCH[1]}")
        [[ $cli =~ ^${TC_NODE_PREFIX}([0-9]+)$ ]] && a_cli=$(node_addr "${BASH_REMATCH[1]}")
        if [[ -n $a_srv && -n $a_cli && $srv != "$cli" ]]; then
            want="server $srv $a_srv got 'hello from $cli' from $a_cli"$'\n'"client $cli to $srv ($a_srv) got 'ack from $srv'"
            smoke_expect_lines "tcp" "$want" "$cli connected to $srv by name ($a_cli -> $a_srv) on a kernel-chosen port"
        else
            s_err+=$'\n'"expected a server line and a client line from two different nodes"
            smoke_result fail "tcp" "rank 1 did not reach rank 0 on another node"
        fi
    fi

    # 9. srun --resv-ports
    smoke_run 60 srun -N"$n" --ntasks-per-node=1 --resv-ports=2 printenv SLURM_STEP_RESV_PORTS
    local lo=${TC_RESV_PORTS%-*} hi=${TC_RESV_PORTS#*-} bad=0 line part count first_line=
    if ((s_rc != 0)) || [[ -z $s_out ]]; then
        bad=1
    else
        while IFS= read -r line; do
            [[ -n $first_line ]] || first_line=$line
            count=0
            IFS=, read -r -a parts <<<"$line"
            for part in "${parts[@]}"; do
                if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
                    count=$((count + BASH_REMATCH[2] - BASH_REMATCH[1] + 1))
                    ((BASH_REMATCH[1] >= lo && BASH_REMATCH[2] <= hi)) || bad=1
                elif [[ $part =~ ^[0-9]+$ ]]; then
                    count=$((count + 1))
                    ((part >= lo && part <= hi)) || bad=1
                else
                    bad=1
                fi
            done
            ((count == 2)) || bad=1
        done <<<"$s_out"
        (($(wc -l <<<"$s_out") == n)) || bad=1
    fi
    if ((bad)); then
        s_err+=$'\n'"expected SLURM_STEP_RESV_PORTS with 2 ports in $TC_RESV_PORTS in each of $n tasks"
        smoke_result fail "resv ports" "srun --resv-ports=2"
    else
        smoke_result pass "resv ports" "srun --resv-ports=2 -> SLURM_STEP_RESV_PORTS=$first_line (MpiParams=ports=$TC_RESV_PORTS)"
    fi

    # Information only (no timing assertions).
    local ts
    ts=$(now_us)
    smoke_run 60 srun "${shape[@]}" true
    printf 'info: srun %s true took %s ms (exit %s)\n' "${shape[*]}" $((($(now_us) - ts) / 1000)) "$s_rc"

    printf 'smoke: %d passed, %d failed, %d skipped in %s s\n' "$s_pass" "$s_fail" "$s_skip" "$(elapsed "$t0")"
    ((s_fail == 0))
}
