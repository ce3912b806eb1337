#!/usr/bin/env python3
"""ctest_targets.py BUILD_DIR [CTEST SELECTION ARGS...]

Prints, one a line, the executable targets that the tests ctest selects
(-L, -LE, -R, -E as given) run, read from the CTestTestfile.cmake files of
a configured, not yet built, BUILD_DIR: each test's command is an
executable of the build's bin/ named as its target. Prints "all" when a
selected test runs anything else (a script whose needs it cannot know), so
the caller builds everything. Exits 1 when nothing is selected."""
import json
import os
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"] + sys.argv[2:],
                         check=True, capture_output=True, text=True).stdout
    names = {t["name"] for t in json.loads(out)["tests"]}
    if not names:
        print("ctest_targets: no test selected", file=sys.stderr)
        return 1
    cmd = {}
    add = re.compile(r'^add_test\(\[=\[(.*?)\]=\] "([^"]*)"')
    for d, _, files in os.walk(build):
        if "CTestTestfile.cmake" in files:
            with open(os.path.join(d, "CTestTestfile.cmake")) as f:
                for line in f:
                    m = add.match(line)
                    if m:
                        cmd[m.group(1)] = m.group(2)
    bindir = os.path.join(build, "bin") + os.sep
    targets = set()
    for n in sorted(names):
        c = cmd.get(n, "")
        if not c.startswith(bindir):
            print("all")
            return 0
        targets.add(os.path.basename(c))
    print("\n".join(sorted(targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
