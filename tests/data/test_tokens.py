#!/usr/bin/python3
"""test_tokens.py — token files as the built program reads them.

usage: test_tokens.py PARC EXAMPLES_DIR

Writes one token stream (vocab 256, the tiny GPT's) as an llm.c file, a u16 and
a u32 file, runs tiny_single, tiny_dp and tiny_pp_1f1b on each with
PRT_DUMP_DATA_ALL, and asserts for every sample every rank loaded:
  - tokens and targets equal an independent Python reader of the file at the
    window the sampling rule names (splitmix64 hash of (seed, step, sample),
    docs/language.md section 5.6), the same in all three formats;
  - the targets are the tokens shifted by one (targets[t] == tokens[t + 1]);
  - each data-parallel rank reads only its own samples, the two together the
    whole batch once; the last pipeline stage reads the same samples as stage 0;
then that every bad file ends the run before step 1 with its message and exit 2
(printed once, by the lowest rank that finds it: the bad tokens lie in rank 1's
half of the scan), and so does --val-data for a plan that does not evaluate.
Exits 1 on any failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

M64 = (1 << 64) - 1
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print(f"FAIL: {msg}", file=sys.stderr)
    return cond


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash2(a, b):
    return splitmix64(splitmix64(a) ^ ((b + 0x632BE59BD9B4E019) & M64))


def write_llmc(path, tokens, magic=20240520, version=1, count=None):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = magic, version, len(tokens) if count is None else count
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def read_tokens(path, fmt):
    """The independent reader: the file's tokens as int64."""
    raw = open(path, "rb").read()
    if fmt == "llmc":
        header = np.frombuffer(raw[:1024], dtype="<i4")
        assert header[0] == 20240520 and header[1] == 1
        tokens = np.frombuffer(raw[1024:], dtype="<u2")
        assert len(tokens) == header[2]
        return tokens.astype(np.int64)
    return np.frombuffer(raw, dtype="<u2" if fmt == "u16" else "<u4").astype(np.int64)


def run(exe, world, args, env=None):
    mpirun = os.environ.get("PARC_MPIRUN") or "mpirun"
    env_extra = env or {}
    cmd = [mpirun, "-np", str(world), "--oversubscribe"]
    for k in sorted(env_extra):
        cmd += ["-x", k]
    r = subprocess.run(cmd + [exe] + args, capture_output=True, text=True, env=prt_dump.run_env(env_extra),
                       timeout=300)
    return r.returncode, r.stdout, r.stderr


def plan_values(parc, plan):
    """seed, batch and seq from the resolved plan (`parc lower --emit=front`)."""
    out = subprocess.run([parc, "lower", plan, "--emit=front"], capture_output=True, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("seed", "batch", "seq") and words[0] not in values:
            values[words[0]] = int(words[1])
    return values


def check_samples(name, info, dumps, stream, seed, steps):
    """dumps: {rank: records}; stream: the file's tokens."""
    batch, seq = int(info["batch"]), int(info["seq"])
    key = hash2(seed, 0x64617461)
    per_step = {}
    for rank, records in dumps.items():
        for step, first, tokens, targets in records:
            B, T = tokens.shape
            check(T == seq, f"{name} rank {rank}: T = {T}, the plan's seq is {seq}")
            check(np.array_equal(targets[:, :-1], tokens[:, 1:]),
                  f"{name} rank {rank} step {step}: targets are not the tokens shifted by one")
            for b in range(B):
                g = first + b
                start = hash2(hash2(key, step), g) % (len(stream) - T)
                want = stream[start:start + T + 1]
                ok = np.array_equal(tokens[b], want[:-1]) and np.array_equal(targets[b], want[1:])
                check(ok, f"{name} rank {rank} step {step} sample {g}: not the file's window at {start}")
                per_step.setdefault(step, {}).setdefault(rank, []).append(g)
    check(sorted(per_step) == list(range(1, steps + 1)), f"{name}: data of steps {sorted(per_step)}")
    return per_step


def good_runs(parc, examples, work, stream):
    write_llmc(os.path.join(work, "tokens.llmc"), stream)
    np.asarray(stream, dtype="<u2").tofile(os.path.join(work, "tokens.u16"))
    np.asarray(stream, dtype="<u4").tofile(os.path.join(work, "tokens.u32"))
    for fmt in ("llmc", "u16", "u32"):
        path = os.path.join(work, "tokens." + fmt)
        check(np.array_equal(read_tokens(path, fmt), stream), f"the Python reader of {fmt} disagrees")
    steps = 2
    for name in ("tiny_single", "tiny_dp", "tiny_pp_1f1b"):
        plan = os.path.join(examples, name + ".par")
        world = prt_dump.world_size(prt_dump.explain(parc, plan))
        info = plan_values(parc, plan)
        exe = os.path.join(work, name)
        prt_dump.build(parc, plan, exe)
        seed = info["seed"]
        seen = {}
        for fmt in ("llmc", "u16", "u32"):
            dump = os.path.join(work, f"{name}.{fmt}.dump")
            rc, out, err = run(exe, world, ["--steps", str(steps), "--data", os.path.join(work, "tokens." + fmt),
                                            "--data-format", fmt],
                               {"PRT_DUMP_DIR": dump, "PRT_DUMP_DATA_ALL": "1"})
            if not check(rc == 0, f"{name} {fmt}: exit {rc}\n{out[-2000:]}{err[-2000:]}"):
                continue
            check(f"--data {work}/tokens.{fmt}: {len(stream)} tokens ({fmt}), every one below the vocab" in out,
                  f"{name} {fmt}: no start-up line for the file:\n{out[:2000]}")
            dumps = {r: prt_dump.read_data(os.path.join(dump, f"data.rank{r}.bin")) for r in range(world)}
            seen[fmt] = check_samples(f"{name} {fmt}", info, dumps, stream, seed, steps)
        for fmt in ("u16", "u32"):
            check(seen.get(fmt) == seen.get("llmc"), f"{name}: {fmt} and llmc runs read different samples")
        per_step = seen.get("llmc", {})
        batch = int(info["batch"])
        for step, ranks in per_step.items():
            if name == "tiny_dp":  # each rank its own share, together the batch once
                shares = [sorted(set(v)) for v in ranks.values()]
                check(len(shares) == world and not set(shares[0]) & set(shares[1]),
                      f"{name} step {step}: ranks share samples {shares}")
                check(sorted(sum(shares, [])) == list(range(batch)), f"{name} step {step}: samples {shares}")
            if name == "tiny_pp_1f1b":  # stage 0 for the tokens, the last stage for the targets
                check(sorted(ranks[0]) == sorted(ranks[world - 1]) == list(range(batch)),
                      f"{name} step {step}: stages read {ranks}")
        print(f"{name}: {world} ranks x {steps} steps: every sample equals the file's window in llmc, u16, u32")


def bad_runs(parc, examples, work, stream):
    plan = os.path.join(examples, "tiny_dp.par")
    exe = os.path.join(work, "tiny_dp")
    # the same plan evaluating, for a bad validation file
    copy = os.path.join(work, "examples")
    shutil.copytree(examples, copy)
    with open(os.path.join(copy, "tiny_dp.par")) as f:
        src = f.read()
    with open(os.path.join(copy, "tiny_dp.par"), "w") as f:
        f.write(src.replace("train {", "train { eval every 1 steps batches 1;", 1))
    exe_eval = os.path.join(work, "tiny_dp_eval")
    prt_dump.build(parc, os.path.join(copy, "tiny_dp.par"), exe_eval)
    world = prt_dump.world_size(prt_dump.explain(parc, plan))
    info = plan_values(parc, plan)
    need = int(info["batch"]) * int(info["seq"]) + 1
    bad_token = stream.copy()
    where = len(stream) * 3 // 4  # in rank 1's half of the scan
    bad_token[where] = 300
    j = lambda f: os.path.join(work, f)  # noqa: E731
    write_llmc(j("magic.bin"), stream, magic=20240521)
    write_llmc(j("version.bin"), stream, version=2)
    write_llmc(j("count.bin"), stream, count=len(stream) + 5)
    write_llmc(j("vocab.bin"), bad_token)
    write_llmc(j("short.bin"), stream[:need - 1])
    with open(j("header.bin"), "wb") as f:
        f.write(b"\x00" * 100)
    with open(j("odd.u16"), "wb") as f:
        f.write(np.asarray(stream[:need + 4], dtype="<u2").tobytes() + b"\x07")
    np.asarray(bad_token, dtype="<u4").tofile(j("vocab.u32"))
    np.asarray(stream, dtype="<u2").tofile(j("good.u16"))
    np.asarray(bad_token, dtype="<u2").tofile(j("vocab.u16"))
    n = len(stream)
    cases = [
        ("magic", ["--data", j("magic.bin")], f"--data {j('magic.bin')}: not an llm.c token file: magic 20240521, "
                                              "expected 20240520 (headerless tokens are format u16 or u32)"),
        ("version", ["--data", j("version.bin")], f"--data {j('version.bin')}: llm.c token file version 2; parc "
                                                  "reads version 1 (uint16 tokens)"),
        ("size", ["--data", j("count.bin")], f"--data {j('count.bin')}: the header says {n + 5} tokens "
                                             f"({2 * (n + 5)} bytes after the header) but the file holds {2 * n} "
                                             "bytes after it"),
        ("header", ["--data", j("header.bin")], f"--data {j('header.bin')}: 100 bytes is shorter than the 1024-byte "
                                                "header of an llm.c token file"),
        ("vocab", ["--data", j("vocab.bin")], f"--data {j('vocab.bin')}: token 300 at index {where} is not below "
                                              "the model's vocab (256)"),
        ("vocab u32", ["--data", j("vocab.u32"), "--data-format", "u32"],
         f"--data {j('vocab.u32')}: token 300 at index {where} is not below the model's vocab (256)"),
        ("validation vocab", ["--data", j("good.u16"), "--data-format", "u16", "--val-data", j("vocab.u16")],
         f"--val-data {j('vocab.u16')}: token 300 at index {where} is not below the model's vocab (256)"),
        ("validation unused", ["--data", j("good.u16"), "--data-format", "u16", "--val-data", j("good.u16")],
         f"--val-data {j('good.u16')}: the plan does not evaluate, so nothing would read it"),
        ("short", ["--data", j("short.bin")], f"--data {j('short.bin')}: {need - 1} tokens are fewer than one batch "
                                              f"(batch {info['batch']} x seq {info['seq']} + 1 = {need})"),
        ("odd size", ["--data", j("odd.u16"), "--data-format", "u16"],
         f"--data {j('odd.u16')}: {2 * (need + 4) + 1} bytes is not a whole number of 2-byte tokens (format u16)"),
        ("missing", ["--data", j("none.bin")], f"--data {j('none.bin')}: cannot open it: No such file or directory"),
        ("bad format", ["--data", j("magic.bin"), "--data-format", "u8"],
         "parc: error: --data-format must be llmc, u16, u32 or text, got 'u8'"),
    ]
    for name, args, message in cases:
        if "--data-format" not in args:
            args = args + ["--data-format", "llmc"]
        rc, out, err = run(exe_eval if name == "validation vocab" else exe, world, args + ["--steps", "2"])
        check(rc == 2, f"bad file {name}: exit {rc}, expected 2\n{out[-1000:]}{err[-1000:]}")
        check(message in err, f"bad file {name}: expected\n  {message}\ngot\n{err[-2000:]}")
        check(err.count(message) == 1, f"bad file {name}: the message is printed {err.count(message)} times")
        check("step 1/" not in out, f"bad file {name}: training started:\n{out[-1000:]}")  # `step 1/N | loss`
        print(f"bad file {name}: exit {rc}: {message if message in err else err.strip()[:200]}")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    parc, examples = argv[1], argv[2]
    rng = np.random.default_rng(7)
    stream = rng.integers(0, 256, size=20000, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="parc-tokens-") as work:
        good_runs(parc, examples, work, stream)
        bad_runs(parc, examples, work, stream)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
