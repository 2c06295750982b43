#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The Debian packages installed on this machine (dpkg -i of E2E_DEB and E2E_SPANK_DEB, the
# command's and the plugin's .deb that the fixture package_build makes; tests/package checks
# their contents without installing them): the
# installed tfslurm runs, man(1) finds both pages, the installed completion works, and srun
# --tfslurm on the test cluster loads the plugin from where the package put it: once through the
# line of the installed /etc/slurm/plugstack.conf.d/tfslurm.conf (uncommented), once by bare name
# from Slurm's default PluginDir. The packages are purged on exit, whatever the outcome; a
# tfslurm package installed before is not touched (the test fails instead). On a cluster of
# another Slurm release, that release's two .deb (test-cluster build) are installed into its
# root filesystem instead, after this machine's (22.05) plugin package is refused there for its
# slurmd dependency.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

(($(id -u) == 0)) || fail "dpkg -i needs root"

# On a cluster of another release: that release's own two .deb (built by `test-cluster build`
# with its toolchain and headers), installed into its root filesystem, where its slurmd and srun
# run.
if [[ -n ${TC_ROOTFS:-} ]]; then
    use_spank_plugin
    debs=("$E2E_RELEASE_BUILD"/tfslurm_*+slurm"${TC_SLURM}"_*.deb)
    spank_debs=("$E2E_RELEASE_BUILD"/tfslurm-spank_*+slurm"${TC_SLURM}"_*.deb)
    [[ -f ${debs[0]} && -f ${spank_debs[0]} ]] ||
        fail "no tfslurm and tfslurm-spank .deb for Slurm $TC_SLURM in $E2E_RELEASE_BUILD"
    cp -- "${debs[0]}" "${spank_debs[0]}" "$E2E_TMPDIR/"
    deb=$E2E_TMPDIR/${debs[0]##*/}
    spank_deb=$E2E_TMPDIR/${spank_debs[0]##*/}
    in_rootfs() { run_bounded 120 "$E2E_TEST_CLUSTER" exec -- "$@"; }
    # Packages left by a killed run of this test are this test's own: remove them first.
    in_rootfs dpkg --purge tfslurm-spank tfslurm >/dev/null 2>&1 || true
    on_exit "$E2E_TEST_CLUSTER exec -- dpkg --purge tfslurm-spank tfslurm >/dev/null 2>&1 || e2e_log 'could not purge tfslurm in $TC_ROOTFS'"

    e2e_log "the 22.05 plugin package of this machine is refused by Slurm $TC_SLURM's dpkg: it depends on slurmd 22.05"
    if [[ -n ${E2E_SPANK_DEB:-} && -f $E2E_SPANK_DEB ]]; then
        cp -- "$E2E_SPANK_DEB" "$E2E_TMPDIR/"
        host_deb=$E2E_TMPDIR/${E2E_SPANK_DEB##*/}
        run_stdout 1 120 "$E2E_TEST_CLUSTER" exec -- dpkg -i "$host_deb"
        assert_contains "$E2E_STDERR" "tfslurm-spank depends on slurmd (<< " "dpkg's refusal"
        in_rootfs dpkg --purge tfslurm-spank >/dev/null 2>&1 || fail "could not remove the refused package"
    fi

    e2e_log "dpkg -i ${deb##*/} ${spank_deb##*/} in Slurm $TC_SLURM's root filesystem"
    run_stdout 0 120 "$E2E_TEST_CLUSTER" exec -- dpkg -i "$deb" "$spank_deb"
    version=$(dpkg-deb -f "$deb" Version)
    assert_eq "${version%-*}" "$(in_rootfs /usr/bin/tfslurm --version)" "the installed tfslurm --version"
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    plugin=/usr/lib/$multiarch/slurm-wlm/spank_tfslurm.so
    conf=/etc/slurm/plugstack.conf.d/tfslurm.conf
    [[ -f $TC_ROOTFS$plugin ]] || fail "no $plugin in $TC_ROOTFS"
    line=$(sed -n 's/^#\(required [^ ]*\)$/\1/p' "$TC_ROOTFS$conf" | sed -n 1p)
    assert_eq "required $plugin" "$line" "the plain line of $conf"

    e2e_log "srun --tfslurm=ps=1 with the plugin the package installed"
    printf '%s\n' "$line" >"$SPANK_CONF"
    run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
    check_tf_configs "$E2E_OUTPUT" 6 1
    assert_eq "" "$(grep 'tfslurm: ' <<<"$E2E_STDERR" || true)" "no tfslurm line"
    spank_uninstall
    no_leftovers 20
    e2e_log "PASS"
    exit 0
fi
for package in "${E2E_DEB:-}" "${E2E_SPANK_DEB:-}"; do
    [[ -n $package && -f $package ]] ||
        fail "no package \"$package\": run the test through ctest (the fixture package_build makes it)"
done
for package in tfslurm tfslurm-spank; do
    if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null || true) == ?[ihUFWt]* ]]; then
        fail "a $package package is already installed here; remove it first (dpkg --purge $package)"
    fi
done

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugin=/usr/lib/$multiarch/slurm-wlm/spank_tfslurm.so
conf=/etc/slurm/plugstack.conf.d/tfslurm.conf
version=$(dpkg-deb -f "$E2E_DEB" Version)

# dpkg_bounded ARGS...: dpkg ARGS under a bound, waiting (up to 120 s) while another dpkg or apt
# holds the dpkg lock.
dpkg_bounded() {
    local i
    for ((i = 0; i < 60; i++)); do
        if run_bounded 120 dpkg "$@" >"$E2E_TMPDIR/dpkg.log" 2>&1; then
            return 0
        fi
        grep -q -i 'lock' "$E2E_TMPDIR/dpkg.log" || break
        sleep 2
    done
    cat "$E2E_TMPDIR/dpkg.log" >&2
    return 1
}

on_exit "dpkg_bounded --purge tfslurm-spank tfslurm || e2e_log 'could not purge the tfslurm packages'"
e2e_log "dpkg -i ${E2E_DEB##*/} ${E2E_SPANK_DEB##*/}"
dpkg_bounded -i "$E2E_DEB" "$E2E_SPANK_DEB" || fail "dpkg -i ${E2E_DEB##*/} ${E2E_SPANK_DEB##*/} failed"

e2e_log "the installed command, man pages and completion"
assert_eq "${version%-*}" "$(/usr/bin/tfslurm --version)" "/usr/bin/tfslurm --version"
assert_eq /usr/share/man/man1/tfslurm.1.gz "$(man -w tfslurm)" "man -w tfslurm"
assert_eq /usr/share/man/man8/spank_tfslurm.8.gz "$(man -w spank_tfslurm)" "man -w spank_tfslurm"
assert_status 0 bash "$E2E_SOURCE_DIR/tests/cli/check_completion.sh" \
    /usr/share/bash-completion/completions/tfslurm
assert_eq "$(grep -c -v -E '^[[:space:]]*(#|$)' "$conf" || true)" 0 "active lines in $conf"

E2E_SPANK_PLUGIN=$plugin
use_spank_plugin

e2e_log "srun --tfslurm=ps=1 with the line of the installed $conf"
line=$(sed -n 's/^#\(required [^ ]*\)$/\1/p' "$conf" | sed -n 1p)
assert_eq "required $plugin" "$line" "the plain line of $conf"
printf '%s\n' "$line" >"$SPANK_CONF"
run_stdout 0 60 srun -N3 --ntasks-per-node=2 --tfslurm=ps=1 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 6 1

e2e_log "srun --tfslurm=ps=2 with the plugin found by name in Slurm's PluginDir"
printf 'required spank_tfslurm.so\n' >"$SPANK_CONF"
run_stdout 0 60 srun -N3 --ntasks-per-node=1 --tfslurm=ps=2 bash -c "$SPANK_PRINT_TASK"
check_tf_configs "$E2E_OUTPUT" 3 2
spank_uninstall

no_leftovers 20
e2e_log "PASS"
