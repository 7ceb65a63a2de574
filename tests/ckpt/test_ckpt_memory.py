#!/usr/bin/python3
"""test_ckpt_memory.py — a resume that reshards allocates nothing beyond the
ledger: the loader reads each saved shard straight into the rank's buffers.

usage: test_ckpt_memory.py PARC EXAMPLES_DIR

A model whose embedding and head are 32768 x 128 fp32 (16 MiB each, 64 MiB each
with gradients and Adam moments) is saved by its tp 2 layout (vocab split) at
step 1 and resumed on 1 rank, and saved and resumed on 1 rank.  Each 1-rank
program runs on its own (no mpirun) under a wrapper that reads its peak RSS:
  - the resumed runs' peak RSS exceeds a fresh 1-rank run's by less than
    MARGIN (4 MiB): a loader holding a whole tensor (16 MiB) or its shards
    would exceed it;
  - --memory of the resharded resume: every class measured equals (weights,
    grads, optim) or stays within (activations, comm, workspace) the ledger;
  - the resumed losses of steps 2..3 equal the uninterrupted tp 2 run's within
    the parity tolerance (1e-5 relative);
  - a flipped byte in rank 1's file is found on the resharding path: exit 2 and
    "checksum mismatch" naming the file and the tensor.
Exits 1 on any failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402

MARGIN_KIB = 4 * 1024
LOSS_TOL = 1e-5
failures = []

MODEL = ("model wide { vocab 32768; seq 32; hidden 128; heads 4; ffn 512; layers 1; embed positions learned; "
         "repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }\n")
TRAIN = "train { batch 2; micro_batch 2; precision fp32; optimizer adamw lr 1e-3 weight_decay 0.0; seed 7; }\n"


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def plan(examples, work, name, gpus, mesh, layout):
    path = os.path.join(work, name + ".par")
    with open(path, "w") as f:
        f.write(MODEL + f'cluster {{ nodes 1; gpus_per_node {gpus}; include "{examples}/common/tiny_cluster.par"; '
                f'}}\n' + TRAIN + f"mesh {{ {mesh} }}\nlayout {{ {layout} }}\n")
    return path


PEAK = ("import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(r.stdout + r.stderr)\n"
        "print('peak_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(r.returncode)\n")


def run_one(exe, args, env=None):
    """Runs a 1-rank program directly; (exit status, output, peak RSS in KiB)."""
    r = subprocess.run([sys.executable, "-c", PEAK, exe] + args, capture_output=True, text=True,
                       env=prt_dump.run_env(env), timeout=600)
    peak = [int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("peak_kib ")]
    return r.returncode, r.stdout, peak[0] if peak else -1


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    parc, examples = sys.argv[1], os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="parc_ckpt_memory_")
    one = plan(examples, work, "wide_one", 1, "dp 1;", "batch -> dp;")
    tp = plan(examples, work, "wide_tp", 2, "tp 2;", "heads -> tp; ffn -> tp; vocab -> tp;")
    e1, e2 = os.path.join(work, "one"), os.path.join(work, "tp")
    prt_dump.build(parc, one, e1)
    prt_dump.build(parc, tp, e2)
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
    ck_tp, ck_one, ref_loss = (os.path.join(work, x) for x in ("ck_tp", "ck_one", "tp.loss"))
    subprocess.run([mpirun, "-np", "2", "--oversubscribe", e2, "--quiet", "--steps", "3"], check=True,
                   capture_output=True, env=prt_dump.run_env({"PRT_LOSS_FILE": ref_loss}), timeout=600)
    subprocess.run([mpirun, "-np", "2", "--oversubscribe", e2, "--quiet", "--steps", "1", "--checkpoint-dir", ck_tp,
                    "--save-on-exit"], check=True, capture_output=True, env=prt_dump.run_env(), timeout=600)
    rc, _, fresh = run_one(e1, ["--quiet", "--steps", "3", "--checkpoint-dir", ck_one, "--checkpoint-every", "1"])
    check(rc == 0 and fresh > 0, f"a fresh 1-rank run: peak {fresh} KiB (exit {rc})")
    res_loss = os.path.join(work, "res.loss")
    rc, out, resharded = run_one(e1, ["--steps", "3", "--memory", "--resume", os.path.join(ck_tp, "step-000000001")],
                                 {"PRT_LOSS_FILE": res_loss})
    check(rc == 0 and resharded - fresh < MARGIN_KIB,
          f"resume from tp 2 on 1 rank: peak {resharded} KiB, {resharded - fresh:+d} KiB over the fresh run "
          f"(margin {MARGIN_KIB}; the embedding alone is 16384 KiB)")
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("0 ")]
    check(len(rows) == 7 and all(r[-1] == "ok" for r in rows), f"resume from tp 2: --memory, every class as the "
          f"ledger ({[r[1] + ':' + r[-1] for r in rows]})")
    ref, got = prt_dump.read_losses(ref_loss), prt_dump.read_losses(res_loss)
    worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in (2, 3)) if sorted(got) == [2, 3] else float("inf")
    check(worst <= LOSS_TOL, f"resume from tp 2: losses of steps 2..3 equal the tp 2 run's (worst {worst:.2e})")
    rc, _, same = run_one(e1, ["--quiet", "--steps", "3", "--resume", os.path.join(ck_one, "step-000000001")])
    check(rc == 0 and same - fresh < MARGIN_KIB, f"resume in the same layout: peak {same} KiB, {same - fresh:+d} KiB "
          f"over the fresh run")
    bad = os.path.join(work, "flip")
    shutil.copytree(os.path.join(ck_tp, "step-000000001"), bad)
    f = os.path.join(bad, "rank-00001.safetensors")
    raw = bytearray(open(f, "rb").read())
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    raw[8 + hlen + header["wte"]["data_offsets"][0] + 1000] ^= 0x10
    open(f, "wb").write(raw)
    rc, out, _ = run_one(e1, ["--quiet", "--steps", "3", "--resume", bad])
    check(rc == 2 and f"{f}: tensor wte: checksum mismatch" in out,
          f"a flipped byte on the resharding path: exit 2 naming the file and wte (exit {rc})")
    if failures:
        print(f"test_ckpt_memory: {len(failures)} failures (work in {work})")
        return 1
    shutil.rmtree(work)
    print("test_ckpt_memory: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
