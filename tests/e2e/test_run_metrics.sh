#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The metrics endpoint (--metrics) scraped by a real Prometheus: a step of 4 ranks on n1 and n2
# (ranks 1 and 3 followers of their node's leader) whose rank 1 trainer fails once and is
# restarted (--max-restarts 1); then each trainer holds 64 MiB, burns a little CPU time and waits
# for the test. Rank 0's launcher serves /metrics on every address of n1, port 9400. The scrape
# is valid per `promtool check metrics` and says what the step is doing (every rank up and
# running, one restart, no verdict yet) and what each trainer uses: at least 64 MiB and some CPU
# time for every rank, the followers' figures carried by their leaders' heartbeats. Debian's
# Prometheus, started by the test on the host's loopback and stopped by its PID, scrapes it every
# second, and its HTTP API returns each rank's restart count with its rank, role and host labels.
# Another user on n1 (nobody) then tries the endpoint's bounds (an oversized request head, every
# connection slot held), reads it as anyone may, and the step ends as it would have. Once the
# step ended, the endpoint is gone.
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

cat >"$dir/train.py" <<'TRAIN'
import os
import sys
import time

if os.environ["SLURM_PROCID"] == "1" and os.environ["TFSLURM_RESTART_COUNT"] == "0":
    sys.exit(3)
ballast = bytearray(64 << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1  # resident
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
while not os.path.exists(os.path.join(os.environ["DIR"], "go")):
    time.sleep(0.1)
TRAIN
settle
DIR=$dir timeout -k 5 120 srun -w n1,n2 -N2 --ntasks-per-node=2 -o "$dir/task%t.out" \
    "$E2E_TFSLURM" run --auth munge --grace 3 --heartbeat 0.5 --metrics 9400 --max-restarts 1 \
    --restart-delay 0.1 -- python3 "$dir/train.py" >"$dir/srun.out" 2>&1 &
srun_pid=$!
on_exit "kill $srun_pid 2>/dev/null || true"

# using() SCRAPE: each rank's memory in MiB and whether its CPU time reached 0.3 s, from the
# scrape's usage series: "rank 0: 64+ MiB, cpu 0.3+ s" when both are reached.
using() {
    python3 -c '
import re, sys
memory, cpu = {}, {}
for line in sys.argv[1].splitlines():
    m = re.match(r"tfslurm_rank_(memory_bytes|cpu_seconds_total)\{rank=\"(\d+)\".*\} (\S+)$", line)
    if m:
        (memory if m.group(1) == "memory_bytes" else cpu)[int(m.group(2))] = float(m.group(3))
for rank in sorted(memory):
    print("rank %d: %s MiB, cpu %s s" % (rank, "64+" if memory[rank] >= 64 << 20 else "<64",
                                         "0.3+" if cpu.get(rank, 0) >= 0.3 else "<0.3"))
' "$1"
}
# The endpoint, once the restart is in it and every trainer holds its memory.
restarted='tfslurm_step_restarts_total 1'
want="rank 0: 64+ MiB, cpu 0.3+ s
rank 1: 64+ MiB, cpu 0.3+ s
rank 2: 64+ MiB, cpu 0.3+ s
rank 3: 64+ MiB, cpu 0.3+ s"
for ((i = 0; i < 300; i++)); do
    scrape=$(curl -sf --max-time 5 "$endpoint" 2>/dev/null || true)
    [[ $scrape == *"$restarted"* && $(using "$scrape") == "$want" ]] && break
    sleep 0.2
done
[[ $scrape == *"$restarted"* ]] ||
    fail "no scrape with the restart at $endpoint: $scrape"$'\n'"$(cat "$dir"/task*.out "$dir/srun.out")"
assert_eq "$want" "$(using "$scrape")" \
    "every trainer's memory and CPU time, the followers' through their leaders"$'\n'"$scrape"
# The start-up phases came on the heartbeats, while the trainers run (no exit yet): each with its
# median and maximum.
phases=$(grep -o '^tfslurm_step_startup_phase_seconds{phase="[a-z]*",stat="[a-z]*"}' <<<"$scrape" |
    cut -d'"' -f2,4 | tr '\n' ' ')
assert_eq 'task"median task"max up"median up"max registered"median registered"max started"median started"max ' \
    "$phases" "the start-up phases, live"
printf '%s\n' "$scrape" >"$dir/scrape.txt"
check=$(promtool check metrics <"$dir/scrape.txt" 2>&1) || fail "promtool: $check"
assert_eq "" "$check" "promtool check metrics has nothing to say"
jid=$(grep -o 'tfslurm_step_info{job="[0-9]*"' <<<"$scrape" | grep -o '[0-9]*')
assert_eq "tfslurm_step_info{job=\"$jid\",step=\"0\",run_id=\"tfslurm-$jid-0\"} 1
tfslurm_step_verdict{verdict=\"none\"} 1
tfslurm_rank_up{rank=\"0\",role=\"worker\",host=\"n1\"} 1
tfslurm_rank_up{rank=\"1\",role=\"worker\",host=\"n1\"} 1
tfslurm_rank_up{rank=\"2\",role=\"worker\",host=\"n2\"} 1
tfslurm_rank_up{rank=\"3\",role=\"worker\",host=\"n2\"} 1
tfslurm_rank_restarts_total{rank=\"0\",role=\"worker\",host=\"n1\"} 0
tfslurm_rank_restarts_total{rank=\"1\",role=\"worker\",host=\"n1\"} 1
tfslurm_rank_restarts_total{rank=\"2\",role=\"worker\",host=\"n2\"} 0
tfslurm_rank_restarts_total{rank=\"3\",role=\"worker\",host=\"n2\"} 0" \
    "$(grep -E '^tfslurm_(step_info|rank_up|rank_restarts_total|step_verdict\{verdict="none"\})' <<<"$scrape")" \
    "the scrape: the step, every rank up, rank 1 restarted once, no verdict"

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
    [[ $(wc -l <<<"$series") == 4 ]] && break
    sleep 0.2
done
assert_eq "rank 0 worker on n1 (job tfslurm): 0
rank 1 worker on n1 (job tfslurm): 1
rank 2 worker on n2 (job tfslurm): 0
rank 3 worker on n2 (job tfslurm): 0" "$series" \
    "Prometheus's API: each rank's restarts with its labels"$'\n'"$(tail -5 "$dir/prometheus.log")"
kill "$prometheus_pid"
wait "$prometheus_pid" 2>/dev/null || true

# Another user on n1 (nobody) tries the endpoint's documented bounds: a request head of 8 KiB
# with no end is refused (431), 16 connections held without a word take every slot, so a 17th is
# closed unanswered, until the endpoint drops them (5 s); then nobody reads the metrics, as
# anyone may. None of it touches the step, which ends as it would have (below).
hdir=$(hostile_client_dir "$dir" hostile)
hostile=$(hostile_client "$hdir" n1 90 metrics "$address" 9400 2>&1) || true
assert_eq "oversized: HTTP/1.1 431 Request Header Fields Too Large
17th: closed unanswered
held 16: closed by the endpoint, 16 unanswered
scrape: HTTP/1.1 200 OK" "$hostile" "another user against the metrics endpoint's bounds"
scrape=$(curl -sf --max-time 5 "$endpoint" 2>/dev/null || true)
assert_eq 'tfslurm_step_verdict{verdict="none"} 1' \
    "$(grep -F 'tfslurm_step_verdict{verdict="none"}' <<<"$scrape")" \
    "after another user's tries, the step runs on, with no verdict yet"

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
