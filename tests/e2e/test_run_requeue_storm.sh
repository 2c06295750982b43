#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# No requeue storms (--requeue-min-run): a job that fails the same way on every run stops
# requeueing after two runs, whatever --max-requeues (3 here) still allows.
# 1. Every node fails its preflight check: no trainer ever starts. Run 1 leaves the failed node
#    out and requeues (its record in the job's comment says "no progress"); run 2, on the other
#    two nodes, fails the same way: rank 0 says why it does not requeue, and the job ends with
#    the step's status 13.
# 2. The trainers save a checkpoint at the same step on every run (they write it in
#    $TFSLURM_PROGRESS_FILE) before the job's time limit: run 1 is requeued ("progress at step
#    40"), run 2 ends at step 40 again and is not, with status 10.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm

# write_job DIR ARGS...: a job script that runs `tfslurm run --requeue --max-requeues 3 ARGS`
# and notes each run's nodes and srun's status.
write_job() {
    local dir=$1
    shift
    {
        printf '#!/bin/bash\n'
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s\n' 'run=${SLURM_RESTART_COUNT:-0}' \
            'echo "$SLURM_JOB_NODELIST" >"$OUT_DIR/nodes$run"' 'rc=0'
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s' 'srun -o "$OUT_DIR/run$run-task%t.out" "$E2E_TFSLURM" run --requeue' \
            ' --max-requeues 3 --auth munge'
        printf ' %q' "$@"
        # shellcheck disable=SC2016 # the job script's own expansions
        printf '%s\n' ' || rc=$?' 'echo "srun: $rc" >"$OUT_DIR/run$run.out"' 'exit "$rc"'
    } >"$dir/job.sh"
    chmod +x "$dir/job.sh"
}

# release JOBID: let the requeued job start (as test_run_requeue_exclude.sh: not at once).
release() {
    sleep 2
    run_bounded 10 scontrol update JobId="$1" StartTime=now || fail "cannot release job $1"
}

# 1. No trainer ever starts.
dir=$(make_tmpdir)
write_job "$dir" --preflight-command false -- true
jid=$(OUT_DIR=$dir sbatch_submit -N2 --ntasks-per-node=1 --requeue --export=ALL \
    -o /dev/null -e "$dir/job.err" "$dir/job.sh")
on_exit "timeout 10 scancel $jid 2>/dev/null || true"
wait_requeued "$jid" 90 "run 0" "$dir/run0*"
line=$(cat "$dir"/run0-task*.out | grep '^tfslurm: ' || true)
[[ $line =~ ^tfslurm:\ error:\ aborting:\ preflight\ failed\ on\ (n[1-3])\ \(rank\ [01],\ worker:[01]\):\ command:\ \"false\"\ exited\ with\ status\ 1\;\ requeueing\ job\ $jid\ without\ (n[1-3])\ \(requeue\ 1\ of\ 3\)$ ]] ||
    fail "run 0: rank 0 requeues without the failed node: $line"
bad=${BASH_REMATCH[1]}
assert_eq "$bad" "${BASH_REMATCH[2]}" "run 0: the node left out is the one that failed"
assert_eq 1 "$(timeout 10 squeue -h -j "$jid" -o %k | grep -cxE "tfslurm run 1: $bad left out \(rank [01] preflight failed\); no progress")" \
    "the job's comment records run 1: the node left out, and no progress"
release "$jid"
rc=0
sbatch_wait "$jid" 90 || rc=$?
assert_eq 13 "$rc" "job $jid ends with the step's status (state $E2E_JOB_STATE): $(cat "$dir"/run1* 2>/dev/null)"
line=$(cat "$dir"/run1-task*.out | grep '^tfslurm: error' || true)
[[ $line =~ ^tfslurm:\ error:\ aborting:\ preflight\ failed\ on\ (n[1-3])\ \(rank\ [01],\ worker:[01]\):\ command:\ \"false\"\ exited\ with\ status\ 1\;\ not\ requeueing\ job\ $jid\ without\ (n[1-3]):\ runs\ 1\ and\ 2\ both\ ended\ before\ any\ trainer\'s\ first\ progress:\ another\ run\ would\ likely\ end\ the\ same\ way$ ]] ||
    fail "run 1: rank 0 stops the requeues and says why: $line"
[[ ${BASH_REMATCH[1]} != "$bad" ]] || fail "run 1 ran on $bad, which was left out: $line"
assert_eq "srun: 13" "$(cat "$dir/run1.out")" "run 1: srun reports the preflight's status"

# 2. The same checkpoint step on every run.
dir2=$(make_tmpdir)
cat >"$dir2/trainer.sh" <<'TRAINER'
#!/bin/bash
saved=0
trap 'saved=1' USR1
while ((saved == 0)); do sleep 0.1; done
echo 40 >"$TFSLURM_PROGRESS_FILE"
TRAINER
chmod +x "$dir2/trainer.sh"
write_job "$dir2" --checkpoint-before 50 -- "$dir2/trainer.sh"
jid2=$(OUT_DIR=$dir2 sbatch_submit -N2 --ntasks-per-node=1 --time=1 --requeue --export=ALL \
    -o /dev/null -e "$dir2/job.err" "$dir2/job.sh")
on_exit "timeout 10 scancel $jid2 2>/dev/null || true"
wait_requeued "$jid2" 60 "run 0" "$dir2/run0*"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 50); requeueing job $jid2 (requeue 1 of 3)" \
    "$(grep -h '^tfslurm: warning' "$dir2"/run0-task*.out)" "run 0: checkpointed and requeued"
assert_eq "tfslurm run 1: progress at step 40" "$(timeout 10 squeue -h -j "$jid2" -o %k)" \
    "the job's comment records run 1's step"
release "$jid2"
rc=0
sbatch_wait "$jid2" 90 || rc=$?
assert_eq 10 "$rc" "job $jid2 ends checkpointed (state $E2E_JOB_STATE): $(cat "$dir2"/run1* 2>/dev/null)"
assert_eq "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal 1) before the job's time limit (--checkpoint-before 50); not requeueing job $jid2: runs 1 and 2 both ended at step 40: another run would likely end the same way" \
    "$(grep -h '^tfslurm: warning' "$dir2"/run1-task*.out)" "run 1: the same step again: not requeued, and why"

no_leftovers 20
e2e_log "PASS"
