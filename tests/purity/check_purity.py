#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The purity rule of docs/ARCHITECTURE.md, checked: a component whose "OS?" cell is `no` is
pure, and none of its files sees Asio or a header of the operating system, directly or through
the project's headers it includes. (A header of a component that touches the OS may be
included: such a component declares pure types too, and its OS calls are in its .cpp files.)

A component's files: include/tfslurm/<folder>/<name>.hpp, src/<folder>/<name>.cpp and every
other file its row names in backticks (`protocol_frame.cpp`, `preflight/node_check.hpp`), found in
the folders of the layers. Prints one line per violation, naming the file, the
include and the chain that brought it in; exits 1 when there is one, 0 otherwise.

The folders are layers too: docs/ARCHITECTURE.md's folder table lists them from the top down,
and a file of include/tfslurm/<folder>/ or src/<folder>/ may include only files of its own folder
and of the folders below it. Each include that points up is a violation of its own.

Usage: check_purity.py ROOT
"""
import os
import re
import sys

# What a pure file may not see: Asio, and the headers of the operating system (POSIX, Linux,
# MUNGE, Slurm). The C++ standard library is fine.
FORBIDDEN = re.compile(
    r"^(boost/asio(/.*|\.hpp)|sys/.*|linux/.*|net/.*|netinet/.*|arpa/.*|unistd\.h|fcntl\.h|"
    r"signal\.h|poll\.h|netdb\.h|dlfcn\.h|pwd\.h|grp\.h|ifaddrs\.h|spawn\.h|dirent\.h|"
    r"sched\.h|munge\.h|slurm/.*)$"
)
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
ROW = re.compile(r"^\| `([a-z0-9_]+)` \|(.*)\| ([^|]*) \|\s*$")
FOLDER_ROW = re.compile(r"^\| `([a-z]+)/` \|")
NAMED_FILE = re.compile(r"`((?:detail/)?[a-z0-9_]+\.(?:cpp|hpp))`")


def components(architecture):
    """(name, files named in the row, pure) for every row of the component tables."""
    rows = []
    with open(architecture, encoding="utf-8") as text:
        for line in text:
            match = ROW.match(line)
            if match:
                name, description, os_cell = match.groups()
                rows.append((name, NAMED_FILE.findall(description), os_cell.strip() == "no"))
    return rows


def find(root, base, name):
    """Every `base/<folder>/.../name` (a component of several files is a folder of its layer;
    name may be `detail/x.hpp`)."""
    found = []
    top = os.path.join(root, base)
    for directory, _, _ in sorted(os.walk(top)):
        if directory != top and os.path.isfile(os.path.join(directory, name)):
            found.append(os.path.relpath(os.path.join(directory, name), root))
    return found


def resolve(root, including, name):
    """The project file an include names, or None (a system or library header)."""
    candidates = [
        os.path.join(root, "include", name),
        os.path.join(root, "src", name),
        os.path.join(os.path.dirname(including), name),
    ]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None


def includes(path):
    with open(path, encoding="utf-8") as text:
        return [m.group(1) for m in map(INCLUDE.match, text) if m]


def folders(architecture):
    """The layers' folders, from the top down, as the folder table lists them."""
    with open(architecture, encoding="utf-8") as text:
        return [m.group(1) for m in map(FOLDER_ROW.match, text) if m]


def folder_of(root, path):
    """The layer folder of a project file (include/tfslurm/<folder>/..., src/<folder>/...)."""
    parts = os.path.relpath(path, root).split(os.sep)
    if parts[:2] == ["include", "tfslurm"] and len(parts) > 3:
        return parts[2]
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    return None


def check_layers(root):
    """One line per include from a folder's file into a folder above it."""
    order = folders(os.path.join(root, "docs", "ARCHITECTURE.md"))
    if not order:
        return ["docs/ARCHITECTURE.md: no folder table found"]
    rank = {name: len(order) - index for index, name in enumerate(order)}  # higher: further up
    violations = []
    for base in ("include/tfslurm", "src"):
        for directory, _, names in sorted(os.walk(os.path.join(root, base))):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                mine = folder_of(root, path)
                if mine not in rank:
                    violations.append(f"{relative}: outside the folders of the layers ({', '.join(order)})")
                    continue
                for header in includes(path):
                    found = resolve(root, path, header)
                    theirs = folder_of(root, found) if found else None
                    if theirs in rank and rank[theirs] > rank[mine]:
                        violations.append(
                            f"{relative}: `{mine}/` includes `{theirs}/`, a folder above it "
                            f"({os.path.relpath(found, root)})")
    return violations


def check(root):
    rows = components(os.path.join(root, "docs", "ARCHITECTURE.md"))
    if not rows:
        return ["docs/ARCHITECTURE.md: no component table found"]
    violations = []
    for name, named, pure in rows:
        if not pure:
            continue
        files = set(find(root, "include/tfslurm", name + ".hpp") + find(root, "src", name + ".cpp"))
        for other in named:
            found = (find(root, "src", other) if other.endswith(".cpp") or "/" in other
                     else find(root, "include/tfslurm", other))
            if not found and other.endswith(".cpp"):
                violations.append(f"{other}: named by the row of `{name}` but missing")
            files.update(found)
        for relative in sorted(files):
            start = os.path.normpath(os.path.join(root, relative))
            # Depth-first over the project's headers, keeping the chain for the message.
            seen = set()
            stack = [(start, [relative])]
            while stack:
                path, chain = stack.pop()
                if path in seen:
                    continue
                seen.add(path)
                for header in includes(path):
                    found = resolve(root, path, header)
                    via = " -> ".join(chain)
                    if found is None:
                        if FORBIDDEN.match(header):
                            violations.append(
                                f"{relative}: pure component `{name}` includes <{header}> ({via})")
                        continue
                    stack.append((found, chain + [os.path.relpath(found, root)]))
    return violations


def main(argv):
    if len(argv) != 2:
        print("usage: check_purity.py ROOT", file=sys.stderr)
        return 2
    violations = check(argv[1]) + check_layers(argv[1])
    for line in violations:
        print(f"check_purity: {line}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
