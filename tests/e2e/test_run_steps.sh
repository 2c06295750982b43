#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Two concurrent steps of one job share their nodes and their control port (--port-base): step
# 1's rank 1 reaches step 0's coordinator first, which rejects it for the wrong step (the hello
# and both proofs name job and step), and moves on to step 1's own coordinator on a fallback
# port. Both steps end 0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)

# The batch script: step 0 starts and keeps its coordinator up until step 1 is over; step 1 runs
# on the same two nodes with the same port base.
cat >"$dir/job.sh" <<'EOF'
#!/bin/bash
tfslurm=$1 dir=$2
# shellcheck disable=SC2016 # expanded by the task's shell
srun --overlap -N2 --ntasks-per-node=1 -o "$dir/step0.out" "$tfslurm" run -v --auth munge \
    --port-base 23600 -- bash -c 'for ((i = 0; i < 600; i++)); do [[ -e $0/step1-done ]] && break; sleep 0.1; done
echo "step $SLURM_STEP_ID rank $SLURM_PROCID"' "$dir" &
first=$!
for ((i = 0; i < 600; i++)); do
    grep -q 'coordinator: listening on 0.0.0.0:23601' "$dir/step0.out" 2>/dev/null && break
    sleep 0.1
done
second=0
# shellcheck disable=SC2016 # expanded by the task's shell
srun --overlap -N2 --ntasks-per-node=1 -o "$dir/step1.out" "$tfslurm" run -v --auth munge \
    --port-base 23600 -- bash -c 'echo "step $SLURM_STEP_ID rank $SLURM_PROCID"' || second=$?
touch "$dir/step1-done"
wait "$first" && first=0 || first=$?
echo "statuses $first $second"
EOF
jid=$(sbatch_submit -N2 --ntasks-per-node=1 -o "$dir/job.out" "$dir/job.sh" "$E2E_TFSLURM" "$dir")
rc=0
sbatch_wait "$jid" 120 || rc=$?
step0=$(cat -- "$dir/step0.out" 2>/dev/null || true)
step1=$(cat -- "$dir/step1.out" 2>/dev/null || true)
all="job: $(cat -- "$dir/job.out")"$'\n'"step 0: $step0"$'\n'"step 1: $step1"
assert_eq 0 "$rc" "the job ends 0"$'\n'"$all"
assert_eq "statuses 0 0" "$(cat -- "$dir/job.out")" "both steps end 0"$'\n'"$all"
assert_eq "step 0 rank 0
step 0 rank 1" "$(grep '^step ' <<<"$step0" | sort)" "step 0's trainers ran"
assert_eq "step 1 rank 0
step 1 rank 1" "$(grep '^step ' <<<"$step1" | sort)" "step 1's trainers ran"
# Step 0's coordinator turns step 1's rank 1 away, naming both steps (more than once if rank 1
# went round every candidate before step 1's coordinator was listening).
rejected=$(grep -c '^tfslurm: warning: coordinator: rejected ' <<<"$step0" || true)
((rejected >= 1)) || fail "step 0's coordinator rejects step 1's rank 1"$'\n'"$all"
wrong_step=$(grep -c -E "^tfslurm: warning: coordinator: rejected rank 1 from 10\.77\.0\.12:[0-9]+ \(pid [0-9]+ on \"n2\"\): wrong step $jid\.1 \(this is step $jid\.0\)$" <<<"$step0" || true)
assert_eq "$rejected" "$wrong_step" "every rejection is for the wrong step, naming both"$'\n'"$all"
# Step 1's rank 0 cannot bind the shared port; its rank 1 moves on from step 0's coordinator.
fallback=$(sed -n 's/^tfslurm: warning: coordinator: cannot listen on 0\.0\.0\.0:23601 (Address already in use): listening on fallback port \([0-9]*\) (1 of 7)$/\1/p' <<<"$step1")
[[ -n $fallback ]] || fail "step 1's rank 0 names its fallback port"$'\n'"$all"
assert_contains "$step1" "tfslurm: debug: rank 1 (worker:1): n1:23601: another step's coordinator (wrong step $jid.1 (this is step $jid.0)); trying n1:$fallback" \
    "step 1's rank 1 tries the next candidate"
assert_contains "$step1" "tfslurm: debug: rank 1 (worker:1): coordinator at n1:$fallback" \
    "step 1's rank 1 registers with its own coordinator"
assert_eq 0 "$(grep -c '^tfslurm: error' <<<"$step0$step1" || true)" "no error"$'\n'"$all"
e2e_log "job $jid: steps 0 and 1 on port base 23600, step 1's coordinator on $fallback"

no_leftovers 20
e2e_log "PASS"
