# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: 'build --slurm R [--tests]', tfslurm built for another Slurm
# release the way a site of that release builds it: with that Debian suite's own compiler,
# libraries and Slurm headers (slurm/spank.h, slurm_version.h). scripts/build-in-release.sh does
# the build, in its root filesystem of that suite (built once; the toolchain check uses the same
# one) and its build tree in the checkout, so a change rebuilds only what it touches. What comes
# out (the SPANK plugin and the .deb) is cached by the content of the sources: an unchanged tree
# is not built again.

# The parts of the checkout a build reads: what the content hash covers.
readonly -a k_build_inputs=(CMakeLists.txt CMakePresets.json cmake cli include src plugins man
    packaging examples LICENSE tests)
# In an output directory: its build also built the tests and passed them.
readonly k_tests_passed=tests-passed

# sources_hash: a hash of every file a build reads (k_build_inputs), their paths and contents.
sources_hash() {
    (
        cd -- "$repo_root" || exit
        local inputs=() path
        for path in "${k_build_inputs[@]}"; do
            [[ -e $path ]] && inputs+=("$path")
        done
        find "${inputs[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    ) | sha256sum | cut -c1-16
}

# cmd_build [--slurm R] [--tests]: build tfslurm (the SPANK plugin, the command and the .deb)
# for release R, unless the sources are unchanged since the last build; print the directory
# that holds spank_tfslurm.so and the .deb. --tests also builds the tests and runs those that
# need no cluster with R's toolchain (scripts/build-in-release.sh's check, in the same build).
cmd_build() {
    local with_tests=0 arg
    local -a rest=()
    for arg in "$@"; do
        if [[ $arg == --tests ]]; then
            with_tests=1
        else
            rest+=("$arg")
        fi
    done
    parse_slurm_option build "${rest[@]}"
    need_root
    load_requested
    validate_release
    [[ -n $TC_ROOTFS ]] ||
        die "Slurm $TC_SLURM is this machine's own release: build with 'cmake --preset dev' (build/dev/plugins/spank/spank_tfslurm.so) or the release preset"
    local suite=${k_release_suite[$TC_SLURM]} cache hash out logfile t0 fd
    cache=${TFSLURM_TC_CACHE:-/var/cache/tfslurm-tc}
    hash=$(sources_hash)
    out=$cache/tfslurm-$TC_SLURM-$hash
    # built: the build of these sources is there (with its tests passed, if asked for).
    built() {
        [[ -f $out/spank_tfslurm.so && -n $(compgen -G "$out/tfslurm_*.deb") &&
            -n $(compgen -G "$out/tfslurm-spank_*.deb") ]] &&
            { ((!with_tests)) || [[ -f $out/$k_tests_passed ]]; }
    }
    if built; then
        printf '%s\n' "$out"
        return 0
    fi
    mkdir -p -- "$cache"
    # One build at a time per release and checkout; the one we waited for may have been ours
    # (scripts/test.sh builds beside the tests that use the build).
    exec {fd}>"$cache/tfslurm-$TC_SLURM.lock"
    flock -w 1800 "$fd" || die "another build for Slurm $TC_SLURM has held its lock for 30 minutes"
    if built; then
        exec {fd}>&-
        printf '%s\n' "$out"
        return 0
    fi
    logfile=$cache/tfslurm-$TC_SLURM.log
    rm -rf -- "$out.tmp"
    mkdir -p -- "$out.tmp"
    t0=$(now_us)
    log "building tfslurm for Slurm $TC_SLURM with Debian $suite's toolchain$( ((with_tests)) && printf ', and its tests') (log: $logfile)"
    local -a options=(--suite "$suite" --package "$out.tmp")
    ((with_tests)) || options+=(--no-tests)
    if ! "$repo_root/scripts/build-in-release.sh" "${options[@]}" >"$logfile" 2>&1; then
        rm -rf -- "$out.tmp"
        exec {fd}>&-
        die_log "$logfile" "building tfslurm for Slurm $TC_SLURM with Debian $suite's toolchain failed"
    fi
    # The headers were that release's: the package says which Slurm it was built for.
    if [[ -z $(compgen -G "$out.tmp/tfslurm_*+slurm${TC_SLURM}_*.deb") ]]; then
        local got
        got=$(cd -- "$out.tmp" && compgen -G 'tfslurm_*.deb' || true)
        rm -rf -- "$out.tmp"
        exec {fd}>&-
        die "Debian $suite's headers are no longer Slurm $TC_SLURM's (the package is ${got:-missing}); this script needs to learn that release"
    fi
    ((with_tests)) && : >"$out.tmp/$k_tests_passed"
    # Keep only this build of the release.
    local old
    for old in "$cache/tfslurm-$TC_SLURM-"*; do
        [[ $old == "$out.tmp" ]] || rm -rf -- "$old"
    done
    mv -- "$out.tmp" "$out"
    exec {fd}>&-
    log "tfslurm for Slurm $TC_SLURM built in $(elapsed "$t0") s: $out"
    printf '%s\n' "$out"
}
