# SPDX-License-Identifier: MIT
# tfslurm test-cluster smoke program: rank 1 connects to rank 0 by host name.
# Run on two nodes by `scripts/test-cluster smoke`.
import os
import socket
import subprocess
import sys
import time

work = sys.argv[1]
rank = int(os.environ["SLURM_PROCID"])
me = socket.gethostname()
hosts = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_STEP_NODELIST"]],
                       check=True, capture_output=True, text=True, timeout=20).stdout.split()
port_file = os.path.join(work, "port")
if rank == 0:
    addr = socket.gethostbyname(me)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind((addr, 0))  # the node's own address; the kernel picks the port
    srv.listen(1)
    srv.settimeout(30)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    conn, peer = srv.accept()
    conn.settimeout(30)
    msg = conn.makefile().readline().strip()
    conn.sendall(f"ack from {me}\n".encode())
    conn.close()
    print(f"server {me} {addr} got '{msg}' from {peer[0]}", flush=True)
else:
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if time.monotonic() > deadline:
            sys.exit(f"client {me}: rank 0 never wrote {port_file}")
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    with socket.create_connection((hosts[0], port), timeout=30) as c:
        c.sendall(f"hello from {me}\n".encode())
        reply = c.makefile().readline().strip()
    print(f"client {me} to {hosts[0]} ({socket.gethostbyname(hosts[0])}) got '{reply}'", flush=True)
