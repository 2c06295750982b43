#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# spank_tfslurm.so's run setting: `srun --tfslurm=run,...` (or run=1 in plugstack.conf) starts
# every task under `tfslurm run` (spank_prepend_task_argv, Slurm 23.11 and later) with the
# step's settings, without the user typing it: the step of ps and workers ends with status 0
# once the workers are done, the ps stopped by tfslurm. On a plugin built for Slurm 22.05 the
# setting is refused at once, naming the release, wherever it was given.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin
require_trainer

# refused LINE CMD...: CMD (bounded) exits non-zero at once, and LINE is the only "tfslurm:"
# line of its output.
refused() {
    local line=$1 rc=0 out
    shift
    out=$(timeout -k 5 30 "$@" 2>&1) || rc=$?
    ((rc != 0 && rc != 124)) || fail "$*: exit status $rc, expected a refusal: $out"
    assert_eq "$line" "$(grep 'tfslurm: ' <<<"$out")" "$*: the plugin's line"
}

if [[ $TC_SLURM == 22.05 ]]; then
    why='needs Slurm 23.11 or later (spank_prepend_task_argv), and this plugin is built for Slurm 22.05'
    hint="(start the trainer as 'srun tfslurm run ...' instead, or install the plugin built for a newer Slurm)"
    e2e_log "22.05: --tfslurm=run is refused by srun, sbatch and salloc"
    spank_install "tfslurm=$E2E_TFSLURM"
    refused "srun: error: tfslurm: --tfslurm run: $why: \"1\" $hint" srun -N1 --tfslurm=run,ps=1 true
    refused "sbatch: error: tfslurm: --tfslurm run: $why: \"1\" $hint" \
        sbatch --hold --tfslurm=run --wrap true
    refused "salloc: error: tfslurm: --tfslurm run: $why: \"yes\" $hint" salloc -N1 --tfslurm=run=yes true
    e2e_log "22.05: TFSLURM_RUN=1 and plugstack.conf run=1 are refused too"
    refused "srun: error: tfslurm: TFSLURM_RUN: $why: \"1\" $hint" env TFSLURM_RUN=1 srun -N1 --tfslurm true
    spank_install "tfslurm=$E2E_TFSLURM" run=1
    refused "srun: error: tfslurm: plugstack.conf run: $why: \"1\" $hint" srun -N1 true
    spank_uninstall
    assert_eq "" "$(timeout 10 squeue -h)" "no job was created"
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi

e2e_log "$TC_SLURM: srun --tfslurm=run,ps=2,ps_placement=spread TRAINER: every task under tfslurm run"
spank_install "tfslurm=$E2E_TFSLURM"
run_stdout 0 120 env TFSLURM_GRACE=5 TFSLURM_AUTH=munge srun -N3 --ntasks-per-node=2 \
    --tfslurm=run,ps=2,ps_placement=spread "$E2E_TRAINER" --work-ms 300
out=$E2E_OUTPUT$'\n'$E2E_STDERR
# Each of the 4 workers exchanged with both ps, by the addresses of tfslurm run's TF_CONFIG.
assert_eq 8 "$(grep -c 'exchanged with ps:' <<<"$out")" "worker/ps exchanges"$'\n'"$out"
assert_eq 4 "$(grep -c 'exiting with status 0' <<<"$out")" "workers that finished"$'\n'"$out"
assert_contains "$out" "coordinator: the work is done (every worker exited 0): stopping 2 remaining ranks" \
    "the coordinator's verdict"
assert_eq 2 "$(grep -c 'the work is done: stopping the trainer' <<<"$out")" "ps stopped by tfslurm"$'\n'"$out"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"

e2e_log "$TC_SLURM: run=1 set by the site in plugstack.conf; the user types nothing of tfslurm"
spank_install "tfslurm=$E2E_TFSLURM" run=1 chief=1 enabled=always
# The parent is tfslurm run's keeper (tfslurm-keeper, a forked tfslurm).
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 120 env TFSLURM_GRACE=5 TFSLURM_AUTH=munge srun -N2 --ntasks-per-node=1 \
    bash -c 'echo "rank $SLURM_PROCID $TFSLURM_ROLE parent $(ps -o comm= -p "$PPID" | cut -d- -f1)"'
assert_eq "rank 0 chief parent tfslurm|rank 1 worker parent tfslurm" \
    "$(grep '^rank ' <<<"$E2E_OUTPUT" | sort | paste -sd'|')" "each task's role and launcher"
e2e_log "...and --tfslurm=off opts a step out"
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N2 --ntasks-per-node=1 --tfslurm=off bash -c 'echo "rank $SLURM_PROCID ${TFSLURM_ROLE-none}"'
assert_eq "rank 0 none|rank 1 none" "$(sort <<<"$E2E_OUTPUT" | paste -sd'|')" "--tfslurm=off"

e2e_log "$TC_SLURM: a tfslurm=PATH that is not there fails the tasks, naming it"
spank_install tfslurm=/nonexistent/tfslurm
run_stdout 1 60 srun -N1 --tfslurm=run true
assert_contains "$E2E_STDERR" 'error: tfslurm: plugstack.conf tfslurm: no executable tfslurm at "/nonexistent/tfslurm" on this node (set tfslurm=PATH in plugstack.conf)' \
    "the task's line"
assert_no_drain
spank_uninstall

no_leftovers 20
e2e_log "PASS"
