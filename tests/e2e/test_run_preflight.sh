#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# --preflight on the real cluster: before any trainer starts, each node's lowest rank checks
# the node (TMPDIR, the interface with --iface, GPUs through NVML where there is one, the site's
# --preflight-command), once per node. Every node passing: the trainers run as usual, and the
# site command ran once on each node. The command failing on n2 alone: the step aborts before
# any trainer starts anywhere, one line names the node, the rank that checked it and the check,
# every task (and srun) exits 13, and nothing is left on any node.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer

# srun groups the tasks of a node by status as they end (`n2: task 2: ...`, `n1: tasks 0-1:
# ...`): each task's own status, whatever the grouping, one `<node> task <n>: <status>` each.
task_statuses() {
    local node tasks code first last t
    while read -r node tasks code; do
        first=${tasks%-*} last=${tasks#*-}
        for ((t = first; t <= last; t++)); do echo "$node task $t: $code"; done
    done < <(sed -nE 's/^srun: error: (n[0-9]+): tasks? ([0-9]+(-[0-9]+)?): Exited with exit code ([0-9]+)$/\1 \2 \4/p' <<<"$1") |
        sort -t' ' -k3n | paste -sd'|'
}

# Every node passes. Each task prints, then waits until all 6 have printed (a marker file per
# rank): the workers' exit stops the ps, which must not happen before it printed.
checks=$(make_tmpdir)
barrier=$(make_tmpdir)
# shellcheck disable=SC2016 # expanded by the check's and the trainer's shells
assert_status 0 run_bounded 120 srun -N3 --ntasks-per-node=2 \
    "$E2E_TFSLURM" run --ps 1 --iface ib0 --auth munge \
    --preflight-command "echo \"\$(hostname)\" >> $checks/\$(hostname)" -- \
    bash -c 'echo "started $SLURM_PROCID"
touch "$0/$SLURM_PROCID"; while (($(ls "$0" | wc -l) < SLURM_NTASKS)); do sleep 0.1; done' "$barrier"
assert_eq 6 "$(grep -c '^started ' <<<"$E2E_OUTPUT")" "every trainer ran"$'\n'"$E2E_OUTPUT"
# Info lines may say that the ps was stopped (the workers may all end before it notices).
assert_eq 0 "$(grep -cE 'tfslurm: (warning|error):' <<<"$E2E_OUTPUT")" "no warning or error of tfslurm's"$'\n'"$E2E_OUTPUT"
assert_eq "n1|n2|n3" "$(cat "$checks"/* | sort | paste -sd'|')" "the command ran once per node"
e2e_log "every node passed"

# The site command fails on n2 only. Layout: rank 0 ps:0 and rank 1 worker:0 on n1, ranks 2-3
# (worker:1, worker:2) on n2, ranks 4-5 on n3: n2's lowest rank, 2, checks it.
started=$(make_tmpdir)
rc=0
# shellcheck disable=SC2016 # expanded by the check's and the trainer's shells
out=$(run_bounded 90 srun -N3 --ntasks-per-node=2 "$E2E_TFSLURM" run --ps 1 --auth munge \
    --preflight-command 'test "$(hostname)" != n2' -- \
    bash -c 'touch "$0/$SLURM_PROCID"; sleep 60' "$started" 2>&1) || rc=$?
assert_eq 13 "$rc" "srun reports the preflight status"$'\n'"$out"
# shellcheck disable=SC2016 # the command as the user typed it
assert_eq 'tfslurm: error: aborting: preflight failed on n2 (rank 2, worker:1): command: "test \"$(hostname)\" != n2" exited with status 1' \
    "$(grep 'tfslurm:' <<<"$out")" "one line names the node, the rank and the check"$'\n'"$out"
assert_eq "n1 task 0: 13|n1 task 1: 13|n2 task 2: 13|n2 task 3: 13|n3 task 4: 13|n3 task 5: 13" \
    "$(task_statuses "$out")" "every task exited 13"$'\n'"$out"
assert_eq 0 "$(grep '^srun: error: ' <<<"$out" | grep -vc 'Exited with exit code 13$')" \
    "no other srun error"$'\n'"$out"
assert_eq "" "$(ls -A "$started")" "no trainer started anywhere"
e2e_log "the command failing on n2: srun status $rc"

no_leftovers 20
e2e_log "PASS"
