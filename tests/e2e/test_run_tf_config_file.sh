#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `tfslurm run --tf-config-file auto` on the cluster: each launcher writes its task's TF_CONFIG
# to a file under the task's TMPDIR, the trainer (Debian's Python) finds TF_CONFIG in os.environ
# through the sitecustomize shim, equal to what `tfslurm env` would have put in the variable,
# and nothing is left in TMPDIR once the step is over.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_trainer
dir=$(make_tmpdir)
[[ -x /usr/bin/python3 ]] || fail "/usr/bin/python3 is needed"

# The trainer prints "<rank> <hostname> <TF_CONFIG>" and one line comparing it with the variable
# `tfslurm env` computes in the same task (without the file setting the launcher gave it).
trainer='
import json, os, socket, subprocess, time
tf = os.environ["TF_CONFIG"]
path = os.environ["TFSLURM_TF_CONFIG_FILE"]
env = dict(os.environ)
del env["TFSLURM_TF_CONFIG_FILE"]
out = subprocess.run([os.environ["E2E_TFSLURM"], "env", "--only", "tf", "--format", "json"],
                     env=env, check=True, capture_output=True, text=True).stdout
same = json.loads(tf) == json.loads(json.loads(out)["TF_CONFIG"])
print(os.environ["SLURM_PROCID"], socket.gethostname(), tf)
print("check", os.environ["SLURM_PROCID"], "file", os.path.dirname(path) == os.environ["TMPDIR"],
      os.path.exists(path), "same", same, flush=True)
# A barrier: no trainer ends before every one has printed. The ps is stopped once the workers
# are done, so a worker that ended first could otherwise stop it before it printed.
barrier = os.environ["BARRIER"]
open(os.path.join(barrier, os.environ["SLURM_PROCID"]), "w").close()
while len(os.listdir(barrier)) < 3:
    time.sleep(0.05)
'
rc=0
barrier=$(make_tmpdir)
out=$(BARRIER=$barrier TMPDIR=$dir TFSLURM_PS=1 run_bounded 90 srun -N3 --ntasks-per-node=1 "$E2E_TFSLURM" run \
    --auth munge --grace 3 --tf-config-file auto /usr/bin/python3 -c "$trainer" 2>&1) || rc=$?
assert_eq 0 "$rc" "the step succeeds"$'\n'"$out"
check_tf_configs "$(grep -E '^[0-9]+ ' <<<"$out")" 3 1
for rank in 0 1 2; do
    assert_eq 1 "$(grep -cx "check $rank file True True same True" <<<"$out")" \
        "rank $rank read TF_CONFIG through the shim"$'\n'"$out"
done
assert_eq 0 "$(grep -c 'tfslurm: error' <<<"$out")" "no error"$'\n'"$out"
remaining=$(find "$dir" -mindepth 1 | sed -n 1,5p)
assert_eq "" "$remaining" "the launchers removed the files and shims"
no_leftovers
e2e_log "TF_CONFIG through files for 3 tasks, nothing left"
