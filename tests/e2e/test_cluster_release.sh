#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The test cluster's Slurm release (scripts/test-cluster up --slurm R, docs/test-cluster.md):
# `exec` runs a command against the cluster's release and exits with its status; the clients
# that the tests, a batch script and a task call are that release's; `status` refuses a
# cluster of another release than TFSLURM_TC_SLURM asks for; a release it does not know and an
# unknown argument are refused by name, before anything is started.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
dir=$(make_tmpdir)
version_re="^slurm-wlm ${TC_SLURM//./\\.}\\.[0-9]+$"

rc=0
"$E2E_TEST_CLUSTER" exec -- sh -c 'exit 7' || rc=$?
assert_eq 7 "$rc" "exec exits with the command's status"

out=$("$E2E_TEST_CLUSTER" exec -- scontrol --version)
[[ $out =~ $version_re ]] || fail "exec -- scontrol --version: \"$out\", expected Slurm $TC_SLURM"
out=$(scontrol --version)
[[ $out =~ $version_re ]] || fail "the tests' scontrol: \"$out\", expected Slurm $TC_SLURM"
run_stdout 0 60 srun -N1 -n1 scontrol --version
[[ $E2E_OUTPUT =~ $version_re ]] || fail "a task's scontrol: \"$E2E_OUTPUT\", expected Slurm $TC_SLURM"
jid=$(sbatch_submit -N1 -n1 -o "$dir/batch.out" --wrap 'scontrol --version')
rc=0
sbatch_wait "$jid" 60 || rc=$?
assert_eq 0 "$rc" "the batch job ran"
out=$(cat "$dir/batch.out")
[[ $out =~ $version_re ]] || fail "a batch script's scontrol: \"$out\", expected Slurm $TC_SLURM"
e2e_log "exec, the tests, a task and a batch script all use Slurm $TC_SLURM"

other=22.05
[[ $TC_SLURM != 22.05 ]] || other=26.05
assert_status 1 env TFSLURM_TC_SLURM=$other "$E2E_TEST_CLUSTER" status
assert_eq "but it runs Slurm $TC_SLURM, not TFSLURM_TC_SLURM=$other" "$(tail -n 1 <<<"$E2E_OUTPUT")" \
    "status names both releases"

assert_status 1 env TFSLURM_TC_SLURM=9.9 "$E2E_TEST_CLUSTER" rootfs
assert_eq 'test-cluster: error: TFSLURM_TC_SLURM: expected one of 22.05 24.11 26.05: "9.9"' \
    "$E2E_OUTPUT" "an unknown release from the environment"
assert_status 1 "$E2E_TEST_CLUSTER" rootfs --slurm 23.11
assert_eq 'test-cluster: error: --slurm: expected one of 22.05 24.11 26.05: "23.11"' \
    "$E2E_OUTPUT" "an unknown release from --slurm"
assert_status 1 "$E2E_TEST_CLUSTER" up --slurm
assert_eq 'test-cluster: error: --slurm: expected a release (22.05 24.11 26.05)' "$E2E_OUTPUT" \
    "--slurm without a value"
assert_status 1 "$E2E_TEST_CLUSTER" up --nodes 4
assert_eq 'test-cluster: error: up: unknown argument "--nodes"; expected --slurm RELEASE (22.05 24.11 26.05)' \
    "$E2E_OUTPUT" "an unknown argument of up"
assert_status 1 "$E2E_TEST_CLUSTER" exec --
assert_eq 'test-cluster: error: usage: test-cluster exec -- CMD [ARGS...]' "$E2E_OUTPUT" "exec without a command"
# The cluster is still the one the test started with.
assert_status 0 "$E2E_TEST_CLUSTER" status

no_leftovers 20
e2e_log "PASS"
