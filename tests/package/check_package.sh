#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_package.sh DEB SOURCE_DIR SLURM_RELEASE: the Debian package built by cpack
# (cmake/packaging.cmake) with the SPANK plugin of Slurm SLURM_RELEASE,
# unpacked into a scratch directory (no root needed): exactly the expected files (plus the
# source tree's examples/), the control data (conffile, dependencies, description), a runnable
# tfslurm, both man pages found by man(1), the commented plugin stack file agreeing with
# plugins/spank/plugstack.conf.example, the installed bash completion, and no lintian errors.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/check_lib.sh"

check_args 3 'DEB SOURCE_DIR SLURM_RELEASE' "$@"
deb=$1 src=$2 slurm=$3
[[ -f $deb ]] || {
    printf 'check_package.sh: no package "%s" (run ctest so that package_build makes it)\n' "$deb" >&2
    exit 1
}

root=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-package.XXXXXX")
trap 'rm -rf -- "$root"' EXIT
dpkg-deb -x "$deb" "$root/fs"
dpkg-deb -e "$deb" "$root/control"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugin=/usr/lib/$multiarch/slurm-wlm/spank_tfslurm.so
doc=/usr/share/doc/tfslurm

# --- files -------------------------------------------------------------------------------------
expected=$(
    {
        printf '%s\n' /etc/slurm/plugstack.conf.d/tfslurm.conf /usr/bin/tfslurm "$plugin" \
            /usr/share/bash-completion/completions/tfslurm "$doc/changelog.Debian.gz" \
            "$doc/copyright" "$doc/spank-LICENSE-NOTE.md" /usr/share/man/man1/tfslurm.1.gz \
            /usr/share/man/man8/spank_tfslurm.8.gz
        if [[ -d $src/examples ]]; then
            (cd "$src/examples" && find . -type f | sed "s|^\.|$doc/examples|")
        fi
    } | LC_ALL=C sort
)
got=$(cd "$root/fs" && find . -type f | sed 's|^\.||' | LC_ALL=C sort)
if [[ $got == "$expected" ]]; then ok "the package holds exactly the expected files"; else
    fail "files differ from the expected ones:"$'\n'"$(diff <(printf '%s\n' "$expected") <(printf '%s\n' "$got") || true)"
fi
for f in /usr/share/man/man1/tfslurm.1.gz /usr/share/man/man8/spank_tfslurm.8.gz "$doc/changelog.Debian.gz"; do
    gzip -t "$root/fs$f" 2>/dev/null || fail "$f is not gzip-compressed"
done

# --- control data ------------------------------------------------------------------------------
conffiles=$(cat "$root/control/conffiles" 2>/dev/null || true)
if [[ $conffiles == /etc/slurm/plugstack.conf.d/tfslurm.conf ]]; then
    ok "conffiles: $conffiles"
else
    fail "conffiles is \"$conffiles\", expected /etc/slurm/plugstack.conf.d/tfslurm.conf"
fi
depends=$(dpkg-deb -f "$deb" Depends)
if [[ $depends == *libc6* ]]; then
    ok "Depends: $depends"
else
    fail "Depends lacks libc6: \"$depends\""
fi
# The plugin's Slurm release: in the version, and the one slurmd the package depends on.
major=${slurm%.*} minor=${slurm#*.}
next=$(printf '%s.%02d' "$major" $((10#$minor + 1)))
if [[ $depends == *"slurmd (>= $slurm), slurmd (<< $next)"* ]]; then
    ok "Depends on the slurmd of Slurm $slurm"
else
    fail "Depends does not pin slurmd to $slurm (>= $slurm, << $next): \"$depends\""
fi
[[ $(dpkg-deb -f "$deb" Version) == *"+slurm$slurm" ]] ||
    fail "the version does not name Slurm $slurm: $(dpkg-deb -f "$deb" Version)"
[[ ${deb##*/} == tfslurm_*"+slurm${slurm}_"*.deb ]] || fail "the file name does not name Slurm $slurm"
dpkg-deb -f "$deb" Description | grep -q -F "built for Slurm $slurm" ||
    fail "the description does not say the plugin is built for Slurm $slurm"
[[ $(dpkg-deb -f "$deb" Package) == tfslurm ]] || fail "Package is not tfslurm"

# --- the command and its man pages -------------------------------------------------------------
version=$("$root/fs/usr/bin/tfslurm" --version)
want_version=$(dpkg-deb -f "$deb" Version)
if [[ $version == "${want_version%-*}" ]]; then
    ok "tfslurm --version: $version"
else
    fail "tfslurm --version says \"$version\", the package is $want_version"
fi
for page in tfslurm spank_tfslurm; do
    where=$(man -M "$root/fs/usr/share/man" -w "$page" 2>&1) || true
    if [[ $where == "$root/fs/usr/share/man/man"[18]"/$page."[18]".gz" ]]; then
        ok "man -w $page"
    else
        fail "man -w $page: \"$where\""
    fi
done

# --- the plugin stack file: inactive, and the lines of plugstack.conf.example ------------------
conf=$root/fs/etc/slurm/plugstack.conf.d/tfslurm.conf
active=$(grep -v -E '^[[:space:]]*(#|$)' "$conf" || true)
if [[ -z $active ]]; then
    ok "tfslurm.conf is all comments"
else
    fail "tfslurm.conf has active lines: $active"
fi
conf_lines=$(sed -n 's/^#\(required .*\)/\1/p' "$conf")
example_lines=$(sed -n 's/^#\{0,1\}\(required .*\)/\1/p' "$src/plugins/spank/plugstack.conf.example")
if [[ $conf_lines == "$example_lines" ]]; then
    ok "tfslurm.conf offers the lines of plugstack.conf.example"
else
    fail "tfslurm.conf lines:"$'\n'"$conf_lines"$'\n'"plugstack.conf.example lines:"$'\n'"$example_lines"
fi
[[ $(head -1 <<<"$conf_lines") == "required $plugin" ]] ||
    fail "the first tfslurm.conf line does not load $plugin: $(head -1 <<<"$conf_lines")"
for doc_file in "$src/man/spank_tfslurm.8" "$src/README.md"; do
    grep -q -F -- "${plugin//-/\\-}" "$doc_file" || grep -q -F -- "$plugin" "$doc_file" ||
        fail "${doc_file#"$src"/} does not name the installed plugin $plugin"
done

# --- completion --------------------------------------------------------------------------------
if bash "$src/tests/cli/check_completion.sh" "$root/fs/usr/share/bash-completion/completions/tfslurm" >"$root/completion.log" 2>&1; then
    ok "the installed completion script completes commands, options and values"
else
    fail "completion: $(cat "$root/completion.log")"
fi

# --- lintian -----------------------------------------------------------------------------------
lintian_status=0
lintian_out=$(lintian --tag-display-limit 0 "$deb" 2>&1) || lintian_status=$?
printf 'lintian (status %s):\n%s\n' "$lintian_status" "${lintian_out:-(no tags)}"
errors=$(grep -E '^E: ' <<<"$lintian_out" || true)
if [[ -z $errors && $lintian_status -eq 0 ]]; then
    ok "lintian: no errors"
else
    fail "lintian errors:"$'\n'"$errors"
fi

check_summary "${deb##*/}"
