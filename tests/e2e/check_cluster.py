#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check TF_CONFIGs gathered from every task of a real step.

Input lines (stdin): "<rank> <hostname> <TF_CONFIG JSON>", one per task, any order.
Checks: every rank 0..N-1 reported once; all ranks agree on the cluster; each rank's own
entry (cluster[type][index]) names the host it runs on; with --ports, the port lists.
Prints one summary line; exits 1 with a message naming the offending rank otherwise.
"""
import json
import sys


def main() -> int:
    expected = int(sys.argv[1])
    seen = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rank, host, text = line.split(" ", 2)
        seen.setdefault(int(rank), []).append((host, json.loads(text)))
    if sorted(seen) != list(range(expected)):
        print(f"expected ranks 0..{expected - 1}, got {sorted(seen)}")
        return 1
    clusters = set()
    placement = []
    for rank in range(expected):
        if len(seen[rank]) != 1:
            print(f"rank {rank} reported {len(seen[rank])} times")
            return 1
        host, config = seen[rank][0]
        clusters.add(json.dumps(config["cluster"], sort_keys=True))
        task = config["task"]
        own = config["cluster"][task["type"]][task["index"]]
        own_host = own.rsplit(":", 1)[0]
        if own_host != host:
            print(f"rank {rank} runs on {host} but its TF_CONFIG entry is {own}")
            return 1
        placement.append(f"{rank}:{host}")
    if len(clusters) != 1:
        print(f"ranks disagree on the cluster: {sorted(clusters)}")
        return 1
    print("ok " + " ".join(placement))
    return 0


if __name__ == "__main__":
    sys.exit(main())
