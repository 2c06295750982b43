#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The metrics endpoint (--metrics) scraped by a real Prometheus: a 2-node step on n1 and n2
# whose rank 1 trainer fails once and is restarted (--max-restarts 1), then both wait for the
# test. Rank 0's launcher serves /metrics on every address of n1, port 9400. The scrape is
# valid per `promtool check metrics` and says what the step is doing (both ranks up and running,
# one restart, no verdict yet); Debian's Prometheus, started by the test on the host's loopback
# and stopped by its PID, scrapes it every second, and its HTTP API returns each rank's restart
# count with its rank, role and host labels. Once the step ended, the endpoint is gone.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
require_tfslurm
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    fail "needs prometheus and promtool (Debian's prometheus package: scripts/setup.sh)"
fi
dir=$(make_tmpdir)
address=$(timeout 10 scontrol show node n1 | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
[[ -n $address ]] || fail "no address of n1"
endpoint="http://$address:9400/metrics"

settle
# shellcheck disable=SC2016 # expanded by the trainers
DIR=$dir timeout -k 5 120 srun -w n1,n2 -N2 --ntasks-per-node=1 -o "$dir/task%t.out" \
    "$E2E_TFSLURM" run --auth munge --grace 3 --metrics 9400 --max-restarts 1 --restart-delay 0.1 -- \
    sh -c '[ "$SLURM_PROCID.$TFSLURM_RESTART_COUNT" != 1.0 ] || exit 3
while [ ! -e "$DIR/go" ]; do sleep 0.1; done' >"$dir/srun.out" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"

# The endpoint, once the restart is in it.
restarted='tfslurm_step_restarts_total 1'
for ((i = 0; i < 300; i++)); do
    scrape=$(curl -sf --max-time 5 "$endpoint" 2>/dev/null || true)
    [[ $scrape == *"$restarted"* && $scrape == *'tfslurm_step_ranks{state="running"} 2'* ]] && break
    sleep 0.2
done
[[ $scrape == *"$restarted"* ]] ||
    fail "no scrape with the restart at $endpoint: $scrape"$'\n'"$(cat "$dir"/task*.out "$dir/srun.out")"
printf '%s\n' "$scrape" >"$dir/scrape.txt"
check=$(promtool check metrics <"$dir/scrape.txt" 2>&1) || fail "promtool: $check"
assert_eq "" "$check" "promtool check metrics has nothing to say"
jid=$(grep -o 'tfslurm_step_info{job="[0-9]*"' <<<"$scrape" | grep -o '[0-9]*')
assert_eq "tfslurm_step_info{job=\"$jid\",step=\"0\",run_id=\"tfslurm-$jid-0\"} 1
tfslurm_step_verdict{verdict=\"none\"} 1
tfslurm_rank_up{rank=\"0\",role=\"worker\",host=\"n1\"} 1
tfslurm_rank_up{rank=\"1\",role=\"worker\",host=\"n2\"} 1
tfslurm_rank_restarts_total{rank=\"0\",role=\"worker\",host=\"n1\"} 0
tfslurm_rank_restarts_total{rank=\"1\",role=\"worker\",host=\"n2\"} 1" \
    "$(grep -E '^tfslurm_(step_info|rank_up|rank_restarts_total|step_verdict\{verdict="none"\})' <<<"$scrape")" \
    "the scrape: the step, both ranks up, rank 1 restarted once, no verdict"

# A real Prometheus scrapes it every second.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tfslurm
    static_configs:
      - targets: ["$address:9400"]
CONFIG
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
prometheus_pid=$!
on_exit "kill $prometheus_pid 2>/dev/null || true; wait $prometheus_pid 2>/dev/null || true"
series=''
for ((i = 0; i < 300; i++)); do
    answer=$(curl -sf --max-time 5 "http://127.0.0.1:$port/api/v1/query?query=tfslurm_rank_restarts_total" 2>/dev/null || true)
    series=$(python3 -c '
import json, sys
try:
    data = json.loads(sys.argv[1])["data"]["result"]
except (ValueError, KeyError, TypeError):
    sys.exit(0)
for item in sorted(data, key=lambda x: x["metric"]["rank"]):
    m = item["metric"]
    print("rank %s %s on %s (job %s): %s" % (m["rank"], m["role"], m["host"], m["job"], item["value"][1]))
' "$answer")
    [[ $(wc -l <<<"$series") == 2 ]] && break
    sleep 0.2
done
assert_eq "rank 0 worker on n1 (job tfslurm): 0
rank 1 worker on n2 (job tfslurm): 1" "$series" \
    "Prometheus's API: each rank's restarts with its labels"$'\n'"$(tail -5 "$dir/prometheus.log")"
kill "$prometheus_pid"
wait "$prometheus_pid" 2>/dev/null || true

# The step ends: the endpoint with it.
touch "$dir/go"
rc=0
wait "$srun_pid" || rc=$?
assert_eq 0 "$rc" "srun: the step completed"$'\n'"$(cat "$dir/srun.out")"
rc=0
curl -sf --max-time 5 "$endpoint" >/dev/null 2>&1 || rc=$?
((rc != 0)) || fail "the endpoint still answers after the step"

no_leftovers 20
e2e_log "PASS"
