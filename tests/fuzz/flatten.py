#!/usr/bin/env python3
"""flatten.py PLAN... -o DIR — writes each plan with its includes written out
(recursively, as the checker splices them) to DIR/NAME.par: the fuzzer's seed
corpus (tests/fuzz/corpus/), since a plan held in memory has no directory to
resolve includes against."""
import os
import re
import sys

INCLUDE = re.compile(r'^(\s*)include\s+"([^"]+)"\s*;(.*)$')


def flat(path, depth=0):
    if depth > 16:
        raise SystemExit(f"{path}: includes nest too deep")
    out = []
    with open(path) as f:
        for line in f.read().splitlines():
            # an include may share its line with other statements: `cluster { ...; include "x"; }`
            m = re.search(r'include\s+"([^"]+)"\s*;', line)
            while m:
                inner = flat(os.path.join(os.path.dirname(path), m.group(1)), depth + 1)
                body = " ".join(x.split("#")[0].strip() for x in inner.splitlines() if x.split("#")[0].strip())
                line = line[:m.start()] + body + line[m.end():]
                m = re.search(r'include\s+"([^"]+)"\s*;', line)
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv):
    if "-o" not in argv:
        raise SystemExit("usage: flatten.py PLAN... -o DIR")
    i = argv.index("-o")
    plans, out = argv[:i] + argv[i + 2:], argv[i + 1]
    for p in plans:
        with open(os.path.join(out, os.path.basename(p)), "w") as f:
            f.write(flat(p))


if __name__ == "__main__":
    main(sys.argv[1:])
