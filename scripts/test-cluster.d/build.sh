# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Part of scripts/test-cluster: 'build --slurm R', tfslurm built for another Slurm release the
# way a site of that release builds it: with that Debian suite's own compiler, libraries and
# Slurm headers (slurm/spank.h, slurm_version.h), inside a build root of that suite. The build
# root is kept apart from the cluster's root filesystem (which stays small and is what the
# nodes run) and is built once, like it, with mmdebstrap; the build tree inside it is kept, so a
# change rebuilds only what it touches. What comes out (the SPANK plugin and the .deb) is cached
# by the content of the sources: an unchanged tree is not built again.

# What a build root holds: the toolchain and tfslurm's build dependencies of that suite, its
# Slurm headers, and dpkg-dev for the .deb (dpkg-shlibdeps).
readonly -a k_build_packages=(g++ cmake make libslurm-dev libcli11-dev nlohmann-json3-dev
    libspdlog-dev libfmt-dev libboost-dev libmunge-dev libsodium-dev dpkg-dev file)
# The parts of the checkout a build reads: what the content hash covers.
readonly -a k_build_inputs=(CMakeLists.txt CMakePresets.json cmake cli include src plugins man
    packaging examples LICENSE)

# build_root_path: the build root of TC_SLURM.
build_root_path() {
    printf '%s/build-%s' "${TFSLURM_TC_CACHE:-/var/cache/tfslurm-tc}" "$TC_SLURM"
}

# ensure_build_root ROOT: build ROOT once (a few minutes, under a lock of its own), the same
# way as the cluster's root filesystem (release.sh, ensure_rootfs), with k_build_packages.
ensure_build_root() {
    local root=$1 want fd
    want="release=$TC_SLURM packages=${k_build_packages[*]}"
    [[ -f $root/$k_rootfs_stamp && $(<"$root/$k_rootfs_stamp") == "$want" ]] && return 0
    command -v mmdebstrap >/dev/null ||
        die "building for Slurm $TC_SLURM needs mmdebstrap: apt-get install mmdebstrap"
    mkdir -p -- "${root%/*}"
    exec {fd}>"$root.lock"
    flock -w 1200 "$fd" || die "another build of $root has held $root.lock for 20 minutes"
    if [[ -f $root/$k_rootfs_stamp && $(<"$root/$k_rootfs_stamp") == "$want" ]]; then
        exec {fd}>&-
        return 0
    fi
    local suite=${k_release_suite[$TC_SLURM]} mirror t0 log=$root.log opts='' packages got
    mirror=$(apt_mirror)
    t0=$(now_us)
    log "building a build root of Debian $suite for Slurm $TC_SLURM in $root (once; log: $log)"
    rm -rf -- "$root" "$root.tmp"
    [[ $suite == sid ]] && opts='[check-valid-until=no] '
    packages=$(
        IFS=,
        printf '%s' "${k_build_packages[*]}"
    )
    if ! mmdebstrap --variant=apt --include="$packages" "$suite" "$root.tmp" \
        "deb ${opts}$mirror $suite main" >"$log" 2>&1; then
        rm -rf -- "$root.tmp"
        exec {fd}>&-
        die_log "$log" "mmdebstrap could not build the build root of Debian $suite from $mirror"
    fi
    got=$(dpkg-query --admindir="$root.tmp/var/lib/dpkg" -W -f='${Version}' libslurm-dev 2>/dev/null) || got=none
    [[ $got =~ ^([0-9]+\.[0-9]+)\. ]] && got=${BASH_REMATCH[1]}
    if [[ $got != "$TC_SLURM" ]]; then
        rm -rf -- "$root.tmp"
        exec {fd}>&-
        die "Debian $suite now packages Slurm $got, not $TC_SLURM; this script needs to learn that release"
    fi
    printf '%s\n' "$want" >"$root.tmp/$k_rootfs_stamp"
    mv -- "$root.tmp" "$root"
    exec {fd}>&-
    log "build root of Slurm $TC_SLURM ready in $(elapsed "$t0") s ($(du -sh -- "$root" | cut -f1))"
}

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

# cmd_build [--slurm R]: build tfslurm (the SPANK plugin, the command and the .deb) for release
# R in its build root, unless the sources are unchanged since the last build; print the
# directory that holds spank_tfslurm.so and the .deb.
cmd_build() {
    parse_slurm_option build "$@"
    need_root
    load_requested
    validate_release
    [[ -n $TC_ROOTFS ]] ||
        die "Slurm $TC_SLURM is this machine's own release: build with 'cmake --preset dev' (build/dev/plugins/spank/spank_tfslurm.so) or the release preset"
    local root hash out work t0 fd
    root=$(build_root_path)
    ensure_build_root "$root"
    hash=$(sources_hash)
    out=${root%/*}/tfslurm-$TC_SLURM-$hash
    if [[ -f $out/spank_tfslurm.so && -n $(compgen -G "$out/tfslurm_*.deb") ]]; then
        printf '%s\n' "$out"
        return 0
    fi
    # One build at a time per build root; each checkout has its own build tree in it.
    exec {fd}>"$root.lock"
    flock -w 1800 "$fd" || die "another build in $root has held $root.lock for 30 minutes"
    work=/var/tmp/tfslurm-build/$(printf '%s' "$repo_root" | sha256sum | cut -c1-12)
    mkdir -p -- "$root$work"
    t0=$(now_us)
    log "building tfslurm for Slurm $TC_SLURM in $root (build tree $work; log: $root$work/build.log)"
    # shellcheck disable=SC2016 # expanded by the shell inside the build root
    if ! "$script_dir/test-cluster.d/enter" "$root" /proc /dev /tmp "$repo_root" -- \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
        sh -c 'set -e
               cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release \
                   -DCMAKE_CXX_FLAGS="-D_FORTIFY_SOURCE=2 -fstack-protector-strong" \
                   -DTFSLURM_BUILD_TESTS=OFF -DTFSLURM_BUILD_BENCH=OFF -DTFSLURM_E2E=OFF
               cmake --build "$2" -j2
               rm -rf "$2/package"
               cd "$2" && cpack -G DEB --config CPackConfig.cmake' \
        tfslurm-build "$repo_root" "$work" >"$root$work/build.log" 2>&1; then
        exec {fd}>&-
        die_log "$root$work/build.log" "building tfslurm for Slurm $TC_SLURM failed"
    fi
    rm -rf -- "$out.tmp"
    mkdir -p -- "$out.tmp"
    cp -- "$root$work/plugins/spank/spank_tfslurm.so" "$root$work"/package/tfslurm_*.deb "$out.tmp/"
    # Keep only this build of the release.
    local old
    for old in "${root%/*}/tfslurm-$TC_SLURM-"*; do
        [[ $old == "$out.tmp" ]] || rm -rf -- "$old"
    done
    mv -- "$out.tmp" "$out"
    exec {fd}>&-
    log "tfslurm for Slurm $TC_SLURM built in $(elapsed "$t0") s: $out"
    printf '%s\n' "$out"
}
