# SPDX-License-Identifier: MIT
"""Hostile clients of a `tfslurm run` control port, for tests/e2e/test_run_hostile.sh.

Run by Debian's /usr/bin/python3 as another user than the job's, always under `timeout`:

  hostile_client.py flood HOST PORT COUNT SECONDS READY_FILE
      Open COUNT connections that never say hello and hold them for SECONDS, reopening every
      one the coordinator closes; READY_FILE gets `flooding <open>` once COUNT connections were
      attempted (then the late rank may start).
  hostile_client.py forge HOST PORT JOB STEP
      Two hellos whose `host` field carries a newline, a forged `tfslurm: error: aborting:`
      line, terminal escape bytes and (in the second, sent raw) bytes that are not UTF-8.
  hostile_client.py noise HOST PORT RATE SECONDS
      Open RATE connections a second for SECONDS that never say hello, hold each until the
      coordinator times it out, and print `opened <n>` once every one was closed.
  hostile_client.py squat HOST PORT ANSWER STOP_FILE READY_FILE [TARGET_FILE]
      Hold HOST:PORT (a job's control port) before the job starts: write READY_FILE once
      listening, answer every connection as ANSWER says until STOP_FILE exists (at most 120 s),
      then print `answered <n>`. ANSWER: `silent` (listen, never accept), `old` (the challenge
      of protocol version 3: a coordinator of an older tfslurm), `garbage` (an SSH banner),
      `forward` (pass the bytes both ways to the coordinator at `HOST PORT`, read from
      TARGET_FILE once a launcher connects, and right after the launcher's first frame inject a
      forged `exit` with status 0 of its own).
  hostile_client.py relay-squat NAME STOP_FILE READY_FILE
      Bind the abstract Unix socket NAME (written `@...`: a node leader's relay) before its
      leader, hold every connection without a word until STOP_FILE exists (at most 120 s);
      READY_FILE gets `squatting <pid>` once bound.
  hostile_client.py relay-knock NAME
      Connect to the abstract Unix socket NAME (a live relay) and read: print `closed unread`
      when it is closed before any byte came, else `answered <n> bytes`.
  hostile_client.py metrics HOST PORT
      Against a step's metrics endpoint (--metrics; its documented bounds: 16 connections, a
      request head of at most 8 KiB within 5 s): a head of exactly 8 KiB with no end, then 16
      connections held without a word and a 17th that asks for /metrics, then a plain scrape.
      Prints `oversized: <status line>`, `17th: closed unanswered` (or what it got), `held 16:
      closed by the endpoint, unanswered` once the endpoint dropped them, `scrape: <status>`.
"""

import json
import os
import resource
import select
import socket
import struct
import sys
import time

FORGED = "tfslurm: error: aborting: forged"


def connect(host, port, timeout=2.0):
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setblocking(False)
    return sock


def read_frame(sock, timeout=10.0):
    """One frame's payload (bytes), or None when the connection closed first."""
    sock.setblocking(True)
    sock.settimeout(timeout)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4 : 4 + struct.unpack(">I", data[:4])[0]]


def closed_by_peer(sock):
    try:
        return sock.recv(65536, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_for_listener(host, port, seconds=60.0):
    """Wait until the coordinator accepts connections (the job starts alongside)."""
    end = time.monotonic() + seconds
    while True:
        try:
            connect(host, port).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))


def flood(host, port, count, seconds, ready_file):
    raise_fd_limit(count + 64)
    held = []
    for _ in range(count):
        try:
            held.append(connect(host, port))
        except OSError:
            pass
    with open(ready_file, "w", encoding="ascii") as out:
        out.write(f"flooding {len(held)}\n")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, sock in enumerate(held):
            if closed_by_peer(sock):
                sock.close()
                try:
                    held[i] = connect(host, port, timeout=0.5)
                except OSError:
                    pass
        time.sleep(0.05)
    for sock in held:
        sock.close()


def hello_payload(challenge, job, step, host_json):
    """The hello as JSON text, with `host` spliced in verbatim (so that it may hold raw bytes)."""
    fields = {
        "type": "hello",
        "v": challenge["v"],
        "job": job,
        "step": step,
        "rank": 1,
        "role": "worker",
        "pid": 4242,
        "auth": "munge",
        "credential": "MUNGE:forged:",
        "nonce": "ab" * 32,
    }
    text = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    # The host first: a protocol error quotes the payload's first 200 bytes.
    return b'{"host":' + host_json + b"," + text[1:]


def forge(host, port, job, step):
    forged_host = "n2\n" + FORGED + "\x1b[2J\x1b]0;owned\x07"
    raw_host = b'"n2\n' + FORGED.encode() + b"\x1b[31m\xff\xfe\xc3(" + b'"'
    for host_json in (json.dumps(forged_host).encode(), raw_host):
        sock = connect(host, port)
        challenge = json.loads(read_frame(sock))
        payload = hello_payload(challenge, job, step, host_json)
        sock.setblocking(True)
        sock.sendall(struct.pack(">I", len(payload)) + payload)
        # The coordinator answers with a reject, or closes the connection.
        read_frame(sock)
        sock.close()
    print("forged 2")


def noise(host, port, rate, seconds):
    raise_fd_limit(int(rate * seconds) + 64)
    held = []
    opened = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            held.append(connect(host, port))
            opened += 1
        except OSError:
            pass
        time.sleep(1.0 / rate)
    while held:
        select.select(held, [], [], 1.0)
        still = []
        for sock in held:
            if closed_by_peer(sock):
                sock.close()
            else:
                still.append(sock)
        held = still
    print(f"opened {opened}")


def frames_in(buffer):
    """The complete frames at the start of BUFFER (bytes) and what is left."""
    frames = []
    while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">I", buffer[:4])[0]:
        end = 4 + struct.unpack(">I", buffer[:4])[0]
        frames.append(buffer[:end])
        buffer = buffer[end:]
    return frames, buffer


def forward(client, target_file):
    """Pass CLIENT's bytes to the coordinator named in TARGET_FILE and back; after the client's
    first frame (its hello) send a forged exit 0 of our own. Returns when either side closes."""
    for _ in range(300):
        if os.path.exists(target_file):
            break
        time.sleep(0.1)
    with open(target_file, encoding="ascii") as target:
        host, port = target.read().split()
    upstream = socket.create_connection((host, int(port)), timeout=5)
    client.setblocking(True)
    upstream.setblocking(True)
    pending = b""
    version = 7
    injected = False
    while True:
        ready, _, _ = select.select([client, upstream], [], [], 30)
        if not ready:
            break
        if upstream in ready:
            data = upstream.recv(65536)
            if not data:
                break
            if data[4:5] == b"{":
                version = json.loads(frames_in(data)[0][0][4:]).get("v", version)
            client.sendall(data)
        if client in ready:
            data = client.recv(65536)
            if not data:
                break
            upstream.sendall(data)
            frames, pending = frames_in(pending + data)
            if frames and not injected:
                forged = json.dumps(
                    {"status": {"code": 0, "kind": "exited"}, "type": "exit", "v": version},
                    sort_keys=True,
                    separators=(",", ":"),
                ).encode()
                upstream.sendall(struct.pack(">I", len(forged)) + forged)
                injected = True
    upstream.close()
    client.close()


def squat(host, port, answer, stop_file, ready_file, target_file=None):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind((host, port))
    server.listen(16)
    with open(ready_file, "w", encoding="ascii") as out:
        out.write(f"squatting {answer}\n")
    if answer == "forward":
        forwarded = 0
        end = time.monotonic() + 120
        while time.monotonic() < end and not os.path.exists(stop_file):
            ready, _, _ = select.select([server], [], [], 0.1)
            if ready:
                client, _ = server.accept()
                forward(client, target_file)
                forwarded += 1
        server.close()
        print(f"answered {forwarded}")
        return
    greeting = {
        "silent": None,
        "old": json.dumps(
            {"nonce": "ab" * 32, "type": "challenge", "v": 3},
            sort_keys=True,
            separators=(",", ":"),
        ).encode(),
        "garbage": b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
    }[answer]
    answered = 0
    held = []
    end = time.monotonic() + 120
    while time.monotonic() < end and not os.path.exists(stop_file):
        if greeting is None:
            time.sleep(0.1)
            continue
        ready, _, _ = select.select([server], [], [], 0.1)
        if not ready:
            continue
        client, _ = server.accept()
        if answer == "old":
            client.sendall(struct.pack(">I", len(greeting)) + greeting)
        else:
            client.sendall(greeting)
        held.append(client)
        answered += 1
    for client in held:
        client.close()
    server.close()
    print(f"answered {answered}")


def abstract_address(name):
    """The address of the abstract Unix socket written `@name`."""
    if not name.startswith("@"):
        raise SystemExit(f"hostile_client.py: not an abstract name: {name!r}")
    return b"\0" + name[1:].encode()


def relay_squat(name, stop_file, ready_file):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(abstract_address(name))
    server.listen(16)
    with open(ready_file, "w", encoding="ascii") as out:
        out.write(f"squatting {os.getpid()}\n")
    held = []
    end = time.monotonic() + 120
    while time.monotonic() < end and not os.path.exists(stop_file):
        ready, _, _ = select.select([server], [], [], 0.1)
        if ready:
            held.append(server.accept()[0])
    for client in held:
        client.close()
    server.close()
    print(f"held {len(held)}")


def relay_knock(name):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(abstract_address(name))
    data = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    sock.close()
    print("closed unread" if not data else f"answered {len(data)} bytes")


HEAD_LIMIT = 8192  # k_max_request_head
SLOTS = 16  # k_metrics_connections
SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: tfslurm\r\n\r\n"


def read_to_end(sock, timeout=30.0):
    """Every byte until the peer closes (a reset ends it too)."""
    sock.setblocking(True)
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    sock.close()
    return data


def status_line(data):
    return data.split(b"\r\n", 1)[0].decode("ascii", "replace") if data else "closed unanswered"


def metrics(host, port):
    # A head of exactly the limit without its blank line: refused, never read further.
    sock = connect(host, port)
    sock.setblocking(True)
    head = b"GET /metrics HTTP/1.1\r\nX-Pad: "
    sock.sendall(head + b"a" * (HEAD_LIMIT - len(head)))
    print(f"oversized: {status_line(read_to_end(sock))}")
    # Every slot held: a 17th connection, accepted after the 16 (the backlog is first in, first
    # out), is closed at once without an answer. The endpoint drops a held connection 5 s after
    # taking it; should one of the 16 be gone before the 17th's answer (a machine stalled that
    # long), the round proves nothing and is tried again.
    for _ in range(3):
        held = [connect(host, port) for _ in range(SLOTS)]
        extra = connect(host, port)
        extra.setblocking(True)
        extra.sendall(SCRAPE)
        answer = read_to_end(extra)
        if not any(closed_by_peer(sock) for sock in held):
            break
        for sock in held:
            sock.close()
    print(f"17th: {status_line(answer)}")
    unanswered = sum(1 for sock in held if read_to_end(sock) == b"")
    print(f"held {SLOTS}: closed by the endpoint, {unanswered} unanswered")
    # Then anyone may read the metrics again, as the manual says.
    sock = connect(host, port)
    sock.setblocking(True)
    sock.sendall(SCRAPE)
    print(f"scrape: {status_line(read_to_end(sock))}")


def main(argv):
    mode = argv[1]
    if mode == "relay-squat":
        relay_squat(argv[2], argv[3], argv[4])
        return
    if mode == "relay-knock":
        relay_knock(argv[2])
        return
    host, port = argv[2], int(argv[3])
    if mode == "squat":
        squat(host, port, argv[4], argv[5], argv[6], argv[7] if len(argv) > 7 else None)
        return
    wait_for_listener(host, port)
    if mode == "flood":
        flood(host, port, int(argv[4]), float(argv[5]), argv[6])
    elif mode == "forge":
        forge(host, port, int(argv[4]), int(argv[5]))
    elif mode == "noise":
        noise(host, port, float(argv[4]), float(argv[5]))
    elif mode == "metrics":
        metrics(host, port)
    else:
        raise SystemExit(f"hostile_client.py: unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
