#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_purity.py fails on a planted include: a copy of the tree where a pure component's file
(the coordinator) includes <unistd.h>, one where a header it includes pulls in Asio, each named
with its chain, and two where a file includes a folder above its own (run/ including os/, common/
a private header of shell/); the tree as it is passes. Exits 0 when all five hold."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(root):
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, "check_purity.py"), root],
        capture_output=True, text=True, check=False)
    return result.returncode, result.stdout


def planted(source, relative, line):
    """A copy of what check_purity.py reads, with `line` added at the top of `relative`."""
    root = tempfile.mkdtemp(prefix="tfslurm-purity-")
    for part in ("docs", "include", "src"):
        shutil.copytree(os.path.join(source, part), os.path.join(root, part))
    path = os.path.join(root, relative)
    with open(path, encoding="utf-8") as text:
        body = text.read()
    with open(path, "w", encoding="utf-8") as text:
        text.write(line + "\n" + body)
    return root


def main(argv):
    source = argv[1]
    failures = []
    code, out = run(source)
    if code != 0:
        failures.append(f"the tree as it is fails:\n{out}")
    cases = [
        ("src/run/coordinator.cpp", "#include <unistd.h>",
         "check_purity: src/run/coordinator.cpp: pure component `coordinator` includes <unistd.h> "
         "(src/run/coordinator.cpp)\n"),
        ("include/tfslurm/common/exit_status.hpp", "#include <boost/asio/io_context.hpp>",
         "check_purity: src/run/coordinator.cpp: pure component `coordinator` includes "
         "<boost/asio/io_context.hpp> (src/run/coordinator.cpp -> include/tfslurm/run/coordinator.hpp -> "),
        ("include/tfslurm/run/relay.hpp", "#include <tfslurm/os/spawn.hpp>",
         "check_purity: include/tfslurm/run/relay.hpp: `run/` includes `os/`, a folder above it "
         "(include/tfslurm/os/spawn.hpp)\n"),
        ("src/common/log.cpp", '#include "shell/detail/node_relay.hpp"',
         "check_purity: src/common/log.cpp: `common/` includes `shell/`, a folder above it "
         "(src/shell/detail/node_relay.hpp)\n"),
    ]
    for relative, line, expected in cases:
        root = planted(source, relative, line)
        try:
            code, out = run(root)
        finally:
            shutil.rmtree(root)
        if code != 1 or expected not in out:
            failures.append(f"{line} in {relative}: status {code}, output:\n{out}")
    for failure in failures:
        print(f"test_planted_include: FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
