#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_package.sh DEB SPANK_DEB SOURCE_DIR SLURM_RELEASE: the two Debian packages built by cpack
# (cmake/packaging.cmake) with the SPANK plugin of Slurm SLURM_RELEASE, unpacked into a scratch
# directory (no root needed): tfslurm (DEB: the command, its man page, completion, examples;
# no Slurm dependency, so that a login node installs it) and tfslurm-spank (SPANK_DEB: the
# plugin, its man page, the plugin stack file; depends on that release's slurmd). Exactly the
# expected files of each (plus the source tree's examples/), the control data (conffile,
# dependencies, descriptions), a runnable tfslurm, both man pages found by man(1), the
# commented plugin stack file agreeing with plugins/spank/plugstack.conf.example, the installed
# bash completion, and no lintian errors in either.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/check_lib.sh"

check_args 4 'DEB SPANK_DEB SOURCE_DIR SLURM_RELEASE' "$@"
deb=$1 spank_deb=$2 src=$3 slurm=$4
for package in "$deb" "$spank_deb"; do
    [[ -f $package ]] || {
        printf 'check_package.sh: no package "%s" (run ctest so that package_build makes it)\n' "$package" >&2
        exit 1
    }
done

root=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-package.XXXXXX")
trap 'rm -rf -- "$root"' EXIT
# Both unpacked into one tree, as dpkg installs them side by side (each package's own files are
# listed from the package itself below).
for package in "$deb" "$spank_deb"; do
    dpkg-deb -x "$package" "$root/fs"
done
dpkg-deb -e "$spank_deb" "$root/control-spank"
dpkg-deb -e "$deb" "$root/control"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugin=/usr/lib/$multiarch/slurm-wlm/spank_tfslurm.so
doc=/usr/share/doc/tfslurm
spank_doc=/usr/share/doc/tfslurm-spank

# --- files -------------------------------------------------------------------------------------
# files_of DEB: the files DEB holds, one absolute path a line, sorted.
files_of() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | LC_ALL=C sort; }
expected=$(
    {
        printf '%s\n' /usr/bin/tfslurm /usr/share/bash-completion/completions/tfslurm \
            "$doc/changelog.Debian.gz" "$doc/copyright" /usr/share/man/man1/tfslurm.1.gz
        if [[ -d $src/examples ]]; then
            (cd "$src/examples" && find . -type f | sed "s|^\.|$doc/examples|")
        fi
    } | LC_ALL=C sort
)
got=$(files_of "$deb")
if [[ $got == "$expected" ]]; then ok "tfslurm holds exactly the expected files"; else
    fail "tfslurm: files differ from the expected ones:"$'\n'"$(diff <(printf '%s\n' "$expected") <(printf '%s\n' "$got") || true)"
fi
expected=$(printf '%s\n' /etc/slurm/plugstack.conf.d/tfslurm.conf "$plugin" "$spank_doc/LICENSE-NOTE.md" \
    "$spank_doc/changelog.Debian.gz" "$spank_doc/copyright" /usr/share/man/man8/spank_tfslurm.8.gz |
    LC_ALL=C sort)
got=$(files_of "$spank_deb")
if [[ $got == "$expected" ]]; then ok "tfslurm-spank holds exactly the expected files"; else
    fail "tfslurm-spank: files differ from the expected ones:"$'\n'"$(diff <(printf '%s\n' "$expected") <(printf '%s\n' "$got") || true)"
fi
for f in /usr/share/man/man1/tfslurm.1.gz /usr/share/man/man8/spank_tfslurm.8.gz \
    "$doc/changelog.Debian.gz" "$spank_doc/changelog.Debian.gz"; do
    gzip -t "$root/fs$f" 2>/dev/null || fail "$f is not gzip-compressed"
done

# --- control data ------------------------------------------------------------------------------
conffiles=$(cat "$root/control-spank/conffiles" 2>/dev/null || true)
if [[ $conffiles == /etc/slurm/plugstack.conf.d/tfslurm.conf ]]; then
    ok "tfslurm-spank conffiles: $conffiles"
else
    fail "tfslurm-spank conffiles is \"$conffiles\", expected /etc/slurm/plugstack.conf.d/tfslurm.conf"
fi
[[ ! -e $root/control/conffiles ]] || fail "tfslurm has conffiles: $(cat "$root/control/conffiles")"
# The command: glibc only (self-contained), nothing of Slurm, so that a login node installs it.
depends=$(dpkg-deb -f "$deb" Depends)
if [[ $depends == libc6* && $depends != *slurm* && $depends != *,* ]]; then
    ok "tfslurm Depends: $depends"
else
    fail "tfslurm should depend on libc6 alone: \"$depends\""
fi
# The plugin's Slurm release: in the version, and the one slurmd the plugin's package depends on.
major=${slurm%.*} minor=${slurm#*.}
next=$(printf '%s.%02d' "$major" $((10#$minor + 1)))
spank_depends=$(dpkg-deb -f "$spank_deb" Depends)
version=$(dpkg-deb -f "$deb" Version)
if [[ $spank_depends == "slurmd (>= $slurm), slurmd (<< $next), tfslurm (= $version), libc6"* ]]; then
    ok "tfslurm-spank Depends on the slurmd of Slurm $slurm and on its own tfslurm: $spank_depends"
else
    fail "tfslurm-spank Depends does not pin slurmd to $slurm (>= $slurm, << $next) and tfslurm to $version: \"$spank_depends\""
fi
for package in "$deb" "$spank_deb"; do
    [[ $(dpkg-deb -f "$package" Version) == *"+slurm$slurm" ]] ||
        fail "${package##*/}: the version does not name Slurm $slurm: $(dpkg-deb -f "$package" Version)"
done
[[ ${deb##*/} == tfslurm_*"+slurm${slurm}_"*.deb ]] || fail "the file name does not name Slurm $slurm"
[[ ${spank_deb##*/} == tfslurm-spank_*"+slurm${slurm}_"*.deb ]] || fail "the plugin's file name does not name Slurm $slurm"
# Readers that take all their input (never grep -q or head in a pipeline: under pipefail the
# writer's SIGPIPE, when the reader leaves first, fails the pipeline by chance).
dpkg-deb -f "$spank_deb" Description | grep -F "built for Slurm $slurm" >/dev/null ||
    fail "the plugin's description does not say it is built for Slurm $slurm"
[[ $(dpkg-deb -f "$deb" Package) == tfslurm ]] || fail "Package is not tfslurm"
[[ $(dpkg-deb -f "$spank_deb" Package) == tfslurm-spank ]] || fail "Package is not tfslurm-spank"
synopses=$(dpkg-deb -f "$deb" Description | sed -n 1p)$'\n'$(dpkg-deb -f "$spank_deb" Description | sed -n 1p)
if [[ $synopses == $'Slurm-aware cluster resolver and launcher for distributed training\nSPANK plugin adding --tfslurm to srun, sbatch and salloc' ]]; then
    ok "each package has its own synopsis"
else
    fail "synopses:"$'\n'"$synopses"
fi

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
for package in "$deb" "$spank_deb"; do
    lintian_status=0
    lintian_out=$(lintian --tag-display-limit 0 "$package" 2>&1) || lintian_status=$?
    printf 'lintian %s (status %s):\n%s\n' "${package##*/}" "$lintian_status" "${lintian_out:-(no tags)}"
    errors=$(grep -E '^E: ' <<<"$lintian_out" || true)
    if [[ -z $errors && $lintian_status -eq 0 ]]; then
        ok "lintian ${package##*/}: no errors"
    else
        fail "lintian errors in ${package##*/}:"$'\n'"$errors"
    fi
done

check_summary "${deb##*/} and ${spank_deb##*/}"
