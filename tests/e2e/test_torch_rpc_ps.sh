#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# examples/torch-rpc-ps/train.py, a parameter server on torch.distributed.rpc, with
# `tfslurm run --ps 2` across the three nodes: the two ps serve forever, the two workers push
# to both, meet at their own barrier and read the sums. The step must end 0 once the workers
# are done (tfslurm stops the ps) and leave nothing on any node. With a worker that raises,
# the step ends with that worker's status and one line naming it, and again leaves nothing.
# Layout of -N3 -n4: ranks 0,1 on n1, 2 on n2, 3 on n3; --ps-placement spread makes ranks 0
# and 2 the ps (rank 0, the rendezvous store, must live as long as the job).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_examples
# Debian sid's PyTorch (Slurm 26.05's root filesystem) is built without TensorPipe, which
# torch.distributed.rpc needs: say so rather than fail in every task (scripts/test.sh does not
# run this test there).
"${E2E_TC_EXEC[@]}" /usr/bin/python3 -c 'import torch.distributed.rpc as r
r.TensorPipeRpcBackendOptions()' 2>/dev/null ||
    fail "the PyTorch of Slurm $TC_SLURM's tasks has no TensorPipe (torch.distributed.rpc)"
dir=$(make_tmpdir)
n=("${TC_NODE_ARRAY[@]}")
launch=(srun -N3 -n4 tfslurm run --ps 2 --ps-placement spread --auth munge --grace 5 --
    python3 "$EXAMPLES/torch-rpc-ps/train.py" --timeout 30)

e2e_log "srun -N3 -n4 tfslurm run --ps 2 -- python3 torch-rpc-ps/train.py"
run_stdout 0 120 "${launch[@]}"
out=$E2E_OUTPUT$'\n'$E2E_STDERR
assert_eq "$(printf '%s\n' \
    "ps0 (rank 0/4 on ${n[0]}): serving" \
    "ps1 (rank 2/4 on ${n[1]}): serving" \
    "worker 0 (rank 1/4 on ${n[0]}): ps0=3.0 ps1=3.0" \
    "worker 1 (rank 3/4 on ${n[2]}): ps0=3.0 ps1=3.0")" \
    "$(grep -E '^(ps[0-9]|worker [0-9])' <<<"$E2E_OUTPUT" | sort)" "what the ps and workers printed"
assert_contains "$out" \
    "coordinator: the work is done (every worker exited 0): stopping 2 remaining ranks" \
    "the ps must be stopped by tfslurm once the workers are done"
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out" || true)" "no error:"$'\n'"$out"
no_leftovers 20

e2e_log "the same with --fail-rank 3: worker 1 raises"
# Per-task files: srun may drop the last lines of a step whose tasks were killed.
run_stdout 1 120 "${launch[@]:0:3}" -o "$dir/fail-%t.out" "${launch[@]:3}" --fail-rank 3
assert_eq "tfslurm: error: aborting: rank 3 (worker:1) on ${n[2]} exited with status 1" \
    "$(cat "$dir"/fail-*.out | grep 'tfslurm: error: aborting')" \
    "the failing worker, named once, with its status"
assert_contains "$(cat "$dir/fail-3.out")" \
    "RuntimeError: worker 1 (rank 3) fails on purpose (--fail-rank)" "the worker's own error"
no_leftovers 20
e2e_log "PASS"
