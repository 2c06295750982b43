#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A SPANK plugin built for one Slurm release refuses to run in another, with one line naming
# both releases and the way out: in srun's error output (a `required` plugin stops srun) and,
# as an `optional` one that srun and slurmstepd skip, in the node's slurmd log. The plugin of
# another release is the one `test-cluster build` made with that release's toolchain and
# headers (on this machine's 22.05 cluster: 24.11's, which Debian 12's dynamic loader refuses
# before any of its code runs; on any other: this machine's 22.05 one).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
use_spank_plugin

if [[ -n ${TC_ROOTFS:-} ]]; then
    foreign=$E2E_HOST_SPANK_PLUGIN
    foreign_release=$(dpkg-query -W -f='${Version}' libslurm-dev)
    foreign_release=${foreign_release:0:5}
else
    foreign_release=24.11
    dir=$(run_bounded 1800 "$E2E_TEST_CLUSTER" build --slurm "$foreign_release") ||
        fail "could not build tfslurm for Slurm $foreign_release"
    foreign=$dir/spank_tfslurm.so
fi
[[ $foreign_release != "$TC_SLURM" ]] || fail "the foreign plugin is of this release, $TC_SLURM"
# Copied where every release's slurmstepd sees it.
cp -- "$foreign" "$E2E_TMPDIR/foreign_spank_tfslurm.so"
foreign=$E2E_TMPDIR/foreign_spank_tfslurm.so
declare -A api=([22.05]=38 [24.11]=42 [26.05]=45)
line="tfslurm: spank_tfslurm.so is built for Slurm $foreign_release and cannot run in Slurm $TC_SLURM (API ${api[$TC_SLURM]}): install the tfslurm-spank package built for Slurm $TC_SLURM, or build the plugin against its slurm/spank.h (spank_tfslurm(8), BUILDING)"

if [[ -z ${TC_ROOTFS:-} ]]; then
    # A plugin built on Debian 13 needs its newer glibc and libstdc++ (GLIBC_2.38,
    # GLIBCXX_3.4.32): Debian 12's dynamic loader refuses it before any of its code runs, so
    # only Slurm's line names it. srun must still stop.
    e2e_log "required: srun of Slurm $TC_SLURM refuses the plugin built on Debian 13 for $foreign_release"
    printf 'required %s\n' "$foreign" >"$SPANK_CONF"
    run_stdout 1 60 srun -N1 true
    assert_contains "$E2E_STDERR" "$foreign" "srun's refusal names the plugin"
    assert_contains "$E2E_STDERR" "not found" "the loader's reason"
    spank_uninstall
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi

e2e_log "required: srun stops with the line naming Slurm $foreign_release and $TC_SLURM"
printf 'required %s\n' "$foreign" >"$SPANK_CONF"
run_stdout 1 60 srun -N1 true
assert_eq "srun: error: $line" "$(grep 'tfslurm: ' <<<"$E2E_STDERR")" "srun's line"
assert_contains "$E2E_STDERR" "Incompatible Slurm plugin $foreign version ($foreign_release" \
    "Slurm's own refusal"

e2e_log "optional: the step runs without it, and slurmstepd says why in the slurmd log"
log=$TC_DIR/log/slurmd-${TC_NODE_ARRAY[0]}.log
before=$(wc -l <"$log")
printf 'optional %s\n' "$foreign" >"$SPANK_CONF"
# shellcheck disable=SC2016 # expanded by the task's shell
run_stdout 0 60 srun -N1 -w "${TC_NODE_ARRAY[0]}" bash -c 'echo "ran ${TF_CONFIG-without TF_CONFIG}"'
assert_eq "ran without TF_CONFIG" "$E2E_OUTPUT" "the step's output"
assert_eq "srun: error: $line" "$(grep 'tfslurm: ' <<<"$E2E_STDERR")" "srun's line"
for ((i = 0; i < 200; i++)); do
    tail -n +"$((before + 1))" "$log" | grep -F -- "error: $line" >/dev/null && break
    sleep 0.1
done
assert_eq 1 "$(tail -n +"$((before + 1))" "$log" | grep -c -F -- "error: $line" || true)" \
    "the line in $log:"$'\n'"$(tail -n +"$((before + 1))" "$log")"
spank_uninstall

e2e_log "the plugin of this release loads"
spank_install enabled=option
run_stdout 0 60 srun -N1 --tfslurm true
assert_eq "" "$(grep 'tfslurm: ' <<<"$E2E_STDERR" || true)" "no tfslurm line"

no_leftovers 20
e2e_log "PASS"
