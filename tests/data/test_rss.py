#!/usr/bin/python3
"""test_rss.py — a rank's resident memory with a 1 GiB token file.

usage: test_rss.py PARC EXAMPLES_DIR [--gib G]

Writes a u16 token file of G GiB (default 1; random tokens below the tiny
GPT's vocab, written in 64 MiB pieces), builds tiny_dp (2 ranks), and runs it
for 10 steps twice, each rank under a wrapper that reports the peak resident
set of the rank it started (getrusage of its child: VmHWM, in KiB, into a file
per rank): once on the synthetic stream, once on the file.  Asserts that the run on the file
starts (its start-up check scans the whole file), trains, and that no rank's
peak grows by more than 16 MiB over the synthetic run's — far below the file,
since the scan reads with pread and the mapping's pages are dropped from the
process after each data call.  (Without that, each scattered sample leaves a
page-cache folio of up to 2 MiB mapped: measured 8 MiB more per step per rank
here, so 10 steps would exceed the limit.)  Prints the peaks and the start-up check's time.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

# Each rank's wrapper writes its peak to a file of its own (argv[1], the rank's
# number appended): two ranks printing to mpirun's forwarded stdout can have
# their lines interleaved mid-line.
WRAPPER = ("import os, resource, subprocess, sys\n"
           "rc = subprocess.call(sys.argv[2:])\n"
           "rank = os.environ.get('OMPI_COMM_WORLD_RANK', os.environ.get('PMI_RANK', str(os.getpid())))\n"
           "with open(sys.argv[1] + '.' + rank, 'w') as f:\n"
           "    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
           "sys.exit(rc)\n")
LIMIT_KIB = 16 * 1024


def run(exe, args, prefix):
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    cmd = [mpirun, "-np", "2", "--oversubscribe", sys.executable, "-c", WRAPPER, prefix, exe] + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env(), timeout=600)
    folder, stem = os.path.split(prefix)
    peaks = [int(open(os.path.join(folder, n)).read()) for n in sorted(os.listdir(folder))
             if n.startswith(stem + ".")]
    return r.returncode, r.stdout, r.stderr, peaks


def main(argv):
    parsed = prt_dump.parse_args(argv, 1.0, __doc__, "--gib", float)
    if parsed is None:
        return 2
    parc, examples, gib = parsed
    failures = []
    with tempfile.TemporaryDirectory(prefix="parc-rss-") as work:
        path = os.path.join(work, "big.u16")
        tokens = int(gib * (1 << 30)) // 2
        rng = np.random.default_rng(3)
        with open(path, "wb") as f:
            piece = 1 << 25  # 32 Mi tokens, 64 MiB
            for at in range(0, tokens, piece):
                f.write(rng.integers(0, 256, size=min(piece, tokens - at), dtype=np.uint16).tobytes())
        exe = os.path.join(work, "tiny_dp")
        prt_dump.build(parc, os.path.join(examples, "tiny_dp.par"), exe)
        rc0, out0, err0, base = run(exe, ["--steps", "10"], os.path.join(work, "peak-synthetic"))
        rc1, out1, err1, peaks = run(exe, ["--steps", "10", "--data", path, "--data-format", "u16"],
                                     os.path.join(work, "peak-file"))
        if rc0 != 0 or len(base) != 2:
            failures.append(f"synthetic run: exit {rc0}\n{out0[-2000:]}{err0[-2000:]}")
        if rc1 != 0 or len(peaks) != 2:
            failures.append(f"run on the file: exit {rc1}\n{out1[-2000:]}{err1[-2000:]}")
        m = re.search(r"data checked in ([0-9.]+) s", out1)
        if not m:
            failures.append("the run on the file printed no start-up check line")
        if not re.search(r"^step 10/10 \|", out1, re.M):
            failures.append("the run on the file did not train 10 steps")
        if not failures:
            grow = max(p - b for p, b in zip(sorted(peaks), sorted(base)))
            size_kib = os.path.getsize(path) // 1024
            print(f"token file {size_kib / 1024:.0f} MiB ({tokens} tokens), 2 ranks: start-up check (scan) "
                  f"{float(m.group(1)):.2f} s")
            print(f"peak resident set per rank: synthetic {sorted(base)} KiB, on the file {sorted(peaks)} KiB; "
                  f"growth {grow} KiB = {grow / size_kib:.4f} of the file (limit {LIMIT_KIB} KiB)")
            if grow > LIMIT_KIB:
                failures.append(f"a rank's peak resident set grew by {grow} KiB with the file (limit {LIMIT_KIB})")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
