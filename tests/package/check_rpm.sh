#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_rpm.sh BUILD_DIR SOURCE_DIR: the RPM packages for RHEL-family sites, built by rpmbuild
# (Debian's rpm package) from BUILD_DIR/packaging/tfslurm.spec (cmake/packaging.cmake) into a
# scratch directory: tfslurm and tfslurm-spank exist and are named for the plugin's Slurm
# release, `rpm -qlp` lists exactly the expected files, the plugin package requires that
# release, the plugin stack file is a config file with no active line, the plugin is linked
# with -z relro -z now, and rpmlint finds no errors.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/check_lib.sh"

check_args 2 'BUILD_DIR SOURCE_DIR' "$@"
build=$1 src=$2
spec=$build/packaging/tfslurm.spec
[[ -f $spec ]] || {
    printf 'check_rpm.sh: no spec "%s" (configure with the SPANK plugin)\n' "$spec" >&2
    exit 1
}

top=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-rpm.XXXXXX")
trap 'rm -rf -- "$top"' EXIT
if ! rpmbuild -bb --quiet --define "_topdir $top" --define "_tmppath $top/tmp" "$spec" \
    >"$top/rpmbuild.log" 2>&1; then
    cat "$top/rpmbuild.log" >&2
    printf 'check_rpm.sh: rpmbuild failed\n' >&2
    exit 1
fi
arch=$(rpm --eval '%{_arch}')
slurm=$(sed -n 's/^%global slurm_release //p' "$spec")
next=$(sed -n 's/^Requires: *slurm < //p' "$spec")
version=$(sed -n 's/^Version: *//p' "$spec")
[[ $slurm =~ ^[0-9]+\.[0-9]{2}$ ]] || fail "the spec names no Slurm release: \"$slurm\""
main=$top/RPMS/$arch/tfslurm-$version-1.slurm$slurm.$arch.rpm
plugin_rpm=$top/RPMS/$arch/tfslurm-spank-$version-1.slurm$slurm.$arch.rpm
for rpm_file in "$main" "$plugin_rpm"; do
    [[ -f $rpm_file ]] || fail "no package ${rpm_file##*/}: $(ls -R "$top/RPMS")"
done
((failures == 0)) || exit 1
ok "packages ${main##*/} and ${plugin_rpm##*/}"

# --- files (rpm -qlp) --------------------------------------------------------------------------
doc=/usr/share/doc/tfslurm
# shellcheck disable=SC2034 # read as ${!want} below
expected_main=$(
    {
        printf '%s\n' /usr/bin/tfslurm /usr/share/bash-completion/completions/tfslurm \
            "$doc" "$doc/copyright" /usr/share/man/man1/tfslurm.1.gz
        if [[ -d $src/examples ]]; then
            (cd "$src/examples" && find . | sed "s|^\.|$doc/examples|")
        fi
    } | LC_ALL=C sort
)
# shellcheck disable=SC2034 # read as ${!want} below
expected_plugin=$(printf '%s\n' /etc/slurm/plugstack.conf.d/tfslurm.conf \
    /usr/lib64/slurm/spank_tfslurm.so "$doc-spank" "$doc-spank/copyright" \
    "$doc-spank/LICENSE-NOTE.md" /usr/share/man/man8/spank_tfslurm.8.gz | LC_ALL=C sort)
for pair in "main:$main" "plugin:$plugin_rpm"; do
    name=${pair%%:*} file=${pair#*:}
    want=expected_$name
    got=$(rpm -qlp "$file" 2>/dev/null | LC_ALL=C sort)
    if [[ $got == "${!want}" ]]; then ok "rpm -qlp ${file##*/}: exactly the expected files"; else
        fail "rpm -qlp ${file##*/} differs:"$'\n'"$(diff <(printf '%s\n' "${!want}") <(printf '%s\n' "$got") || true)"
    fi
done

# --- dependencies and config files -------------------------------------------------------------
requires=$(rpm -qp --requires "$plugin_rpm" 2>/dev/null)
for want in "slurm >= $slurm" "slurm < $next" "tfslurm = $version-1.slurm$slurm"; do
    if grep -qxF -- "$want" <<<"$requires"; then ok "tfslurm-spank requires $want"; else
        fail "tfslurm-spank does not require \"$want\":"$'\n'"$requires"
    fi
done
config=$(rpm -qp --configfiles "$plugin_rpm" 2>/dev/null)
[[ $config == /etc/slurm/plugstack.conf.d/tfslurm.conf ]] ||
    fail "config files of tfslurm-spank: \"$config\""
rpm -qp --requires "$main" 2>/dev/null | grep '^slurm' >/dev/null &&
    fail "the tfslurm package requires Slurm (only the plugin does)"

# --- contents: the plugin stack file, the plugin's link flags ----------------------------------
mkdir -p "$top/fs"
for rpm_file in "$main" "$plugin_rpm"; do
    (cd "$top/fs" && rpm2cpio "$rpm_file" | cpio -idm --quiet)
done
conf=$top/fs/etc/slurm/plugstack.conf.d/tfslurm.conf
active=$(grep -v -E '^[[:space:]]*(#|$)' "$conf" || true)
[[ -z $active ]] || fail "tfslurm.conf has active lines: $active"
first=$(sed -n 's/^#\(required [^ ]*\)$/\1/p' "$conf" | sed -n 1p)
if [[ $first == "required /usr/lib64/slurm/spank_tfslurm.so" ]]; then
    ok "tfslurm.conf offers: $first (commented out)"
else
    fail "the first line of tfslurm.conf does not load /usr/lib64/slurm/spank_tfslurm.so: $first"
fi
so=$top/fs/usr/lib64/slurm/spank_tfslurm.so
dynamic=$(readelf -d "$so")
headers=$(readelf -lW "$so")
if grep -q 'BIND_NOW' <<<"$dynamic" && grep -q 'GNU_RELRO' <<<"$headers"; then
    ok "the plugin is linked with -z relro -z now"
else
    fail "the plugin lacks BIND_NOW or GNU_RELRO"
fi
[[ $("$top/fs/usr/bin/tfslurm" --version) == "$version" ]] || fail "tfslurm --version"

# --- rpmlint -----------------------------------------------------------------------------------
lint_status=0
lint=$(rpmlint --config "$(dirname -- "${BASH_SOURCE[0]}")/rpmlint.toml" "$main" "$plugin_rpm" 2>&1) ||
    lint_status=$?
printf 'rpmlint (status %s):\n%s\n' "$lint_status" "$lint"
errors=$(grep -E ': E: ' <<<"$lint" || true)
if [[ -z $errors ]]; then ok "rpmlint: no errors"; else
    fail "rpmlint errors:"$'\n'"$errors"
fi

check_summary "the packages of Slurm $slurm"
