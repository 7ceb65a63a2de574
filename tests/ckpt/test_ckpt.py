#!/usr/bin/python3
"""test_ckpt.py — checkpoints: bit-exact resume, resharding, kills, corruption, signals.

usage: test_ckpt.py PARC EXAMPLES_DIR [part ...]   parts: exact reshard kill corrupt signal export
                                                   (default: all)

exact    for every parity layout (and bf16 on 1 and 8 ranks): 10 uninterrupted
         steps equal 6 steps + --save-on-exit + a new process resuming to 10: the
         loss lines are the same text and every rank's final parameter dump
         (PRT_DUMP_DIR, raw f32 / widened bf16) is the same bytes.
reshard  tiny_3d (8 ranks) saved at step 5 resumes on 1 rank, tp 2, ZeRO-3 dp 2,
         interleaved pp 2, pp 2 split 3 + 1 and pp 3 split 1 + 2 + 1; steps 6..10 equal the uninterrupted tiny_3d run within
         the parity tests' tolerances (loss 1e-5 relative; parameters 1e-5 of max|b|
         plus 1e-2 of lr).  The same for tiny_tied_pp (a tied head, the table held by
         both end stages) resumed on one rank and on pp 2 x tp 2; padded ZeRO shards
         onto even ones and back; interleaved chunks of unlike sizes (tiny_l6) onto
         one rank and back; a mixture of experts' experts split over dp onto one
         rank, and one rank onto experts over dp x tp 2; the mixture in every
         second layer from a pipeline onto dp x tp.
kill     PRT_TEST_CKPT_DIE kills the last rank (SIGKILL) inside the save of step 6,
         after its shard is written and before the rename: the job fails, step 4's
         checkpoint is still `latest`, resuming from it reproduces the curve, and the
         next save clears what the killed one left.
corrupt  bad checkpoint options exit 2 before training; a flipped byte in a tensor, a truncated rank file, a deleted rank file, a
         checkpoint of another model: each exits 2 with a message naming the file
         (and the tensor).
signal   SIGTERM to the ranks mid-run: they finish the step, save it, say so and
         exit within seconds; resuming continues the same loss curve, bitwise.
export   `parc export --names parc` of tiny_3d (8 ranks) at step 10, read with the plain reader
         below (json + struct + numpy.frombuffer): every parameter under its global
         name and shape, bitwise the 3d run's final parameters, and equal to the
         single-rank run's within the parity tolerances; --master of tiny_bf16_3d
         gives the fp32 master weights, of which the bf16 export is the rounding.
Exits 1 on any failure.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import numpy as np  # noqa: E402

EXACT = ["tiny_single", "tiny_dp", "tiny_tp", "tiny_sp", "tiny_pp_gpipe", "tiny_pp_1f1b", "tiny_pp_interleaved",
         "tiny_zero1", "tiny_zero2", "tiny_zero3", "tiny_recompute", "tiny_3d", "tiny_bf16", "tiny_bf16_3d",
         "tiny_tied_pp", "tiny_tied_pp_tp", "tiny_b12_dp3_zero1", "tiny_b12_dp3_zero3"]
# a tied head across stages saved at step 5 resumes on one stage and with tensor parallelism
TIED_FROM, TIED_TO = "tiny_tied_pp", ["tiny_tied", "tiny_tied_pp_tp"]
# ... and onto pipelines split otherwise: 3 + 1 layers (the plan's stages) and 1 + 2 + 1 (balance auto)
RESHARD_TO = ["tiny_single", "tiny_tp", "tiny_zero3", "tiny_pp_interleaved", "tiny_pp_uneven", "tiny_pp_balance"]
# padded ZeRO shards (dp 3 on parameters that do not divide by 3) to even ones and back
PADDED = [("tiny_b12_dp3_zero3", "tiny_b12_dp2_zero3"), ("tiny_b12_dp2_zero3", "tiny_b12_dp3_zero3"),
          ("tiny_b12_dp3_zero1", "tiny_b12_single")]
# interleaved chunks of unlike sizes (layers 0, 3..4 on stage 0; 1..2, 5 on stage 1) onto one rank and back
UNEVEN_CHUNKS = [("tiny_l6_pp_interleaved_uneven_zero3", "tiny_l6_single"),
                 ("tiny_l6_single", "tiny_l6_pp_interleaved_uneven")]
# a mixture of experts with its experts split over dp (and ZeRO-3 for the rest) onto one rank,
# one rank onto experts over dp x tp 2, and experts over ep 2 inside dp 2 x ep 2 with ZeRO-3
# over dp ep (each expert's shards on its expert-data-parallel ranks, dp) onto experts over dp 2
# and the mixture in every second layer, pipelined over pp 2 with experts over dp, onto dp 2 x tp 2
# with ZeRO-3 (each layer's parameters under its own global layer on both sides); experts over dp
# beside ring attention over cp with ZeRO-1 over dp cp onto cp 2 alone
EXPERTS = [("tiny_moe_ep_zero3", "tiny_moe"), ("tiny_moe", "tiny_moe_ep_tp"), ("tiny_moe_edp_zero3", "tiny_moe_ep"),
           ("tiny_moe_every_pp", "tiny_moe_every_ep_tp"), ("tiny_moe_ring_ep", "tiny_moe_cp")]
# ZeRO-3 sharded over the context axis (dp 2 x cp 2, ring attention) onto one rank, one rank
# onto ZeRO-1 over cp, and ZeRO-3 over the data group dp*cp onto ZeRO-1 over it
CONTEXT = [("tiny_rope_ring_zero3_cp", "tiny_rope"), ("tiny_rope", "tiny_rope_ring_zero1_cp"),
           ("tiny_rope_ring_zero3_group", "tiny_rope_cp_zero1_group")]
LOSS_TOL, PARAM_TOL, PARAM_ATOL_LR = 1e-5, 1e-5, 1e-2

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


class Plans:
    def __init__(self, parc, examples, work):
        self.parc, self.examples, self.work, self.info = parc, examples, work, {}

    def exe(self, name):
        exe = os.path.join(self.work, name)
        if name not in self.info:
            plan = os.path.join(self.examples, name + ".par")
            self.info[name] = prt_dump.world_size(prt_dump.explain(self.parc, plan))
            prt_dump.build(self.parc, plan, exe)
        return exe

    def run(self, name, args, env=None, expect=0, popen=False):
        """Runs plan `name` on its world size with runtime args; returns (rc, stdout + stderr)."""
        exe = self.exe(name)
        mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")
        env = dict(env or {})
        cmd = [mpirun, "-np", str(self.info[name]), "--oversubscribe"]
        for k in sorted(env):
            cmd += ["-x", k]
        cmd += [exe, "--quiet"] + args
        if popen:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=prt_dump.run_env(env))
        r = subprocess.run(cmd, capture_output=True, text=True, env=prt_dump.run_env(env), timeout=300)
        out = r.stdout + r.stderr
        if expect is not None and r.returncode != expect:
            raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}, expected {expect}:\n{out[-3000:]}")
        return r.returncode, out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def dumps_equal(a, b):
    fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
    return bool(fa) and fa == fb and all(read(os.path.join(a, f)) == read(os.path.join(b, f)) for f in fa if f.startswith("params"))


def test_exact(plans, work):
    for name in EXACT:
        d = os.path.join(work, "exact", name)
        os.makedirs(d)
        full_loss, part_loss, res_loss = (os.path.join(d, x) for x in ("full.loss", "part.loss", "res.loss"))
        plans.run(name, ["--steps", "10"], {"PRT_LOSS_FILE": full_loss, "PRT_DUMP_DIR": os.path.join(d, "full")})
        ck = os.path.join(d, "ck")
        plans.run(name, ["--steps", "6", "--checkpoint-dir", ck, "--save-on-exit"], {"PRT_LOSS_FILE": part_loss})
        plans.run(name, ["--steps", "10", "--checkpoint-dir", ck, "--resume", "latest"],
                  {"PRT_LOSS_FILE": res_loss, "PRT_DUMP_DIR": os.path.join(d, "res")})
        full = open(full_loss).read().splitlines()
        resumed = open(part_loss).read().splitlines() + open(res_loss).read().splitlines()
        check(full == resumed and len(full) == 10, f"exact {name}: 10 loss lines of 6 + save + resume equal the "
              f"uninterrupted run's")
        check(dumps_equal(os.path.join(d, "full"), os.path.join(d, "res")),
              f"exact {name}: every rank's final parameters are the same bytes")


def test_reshard(plans, work):
    d = os.path.join(work, "reshard")
    os.makedirs(d)
    ref_loss = os.path.join(d, "3d.loss")
    plans.run("tiny_3d", ["--steps", "10"], {"PRT_LOSS_FILE": ref_loss, "PRT_DUMP_DIR": os.path.join(d, "3d")})
    ck = os.path.join(d, "ck")
    plans.run("tiny_3d", ["--steps", "5", "--checkpoint-dir", ck, "--save-on-exit"])
    ref = prt_dump.read_losses(ref_loss)
    ref_params = prt_dump.merge_params(os.path.join(d, "3d"))
    lr = max(s["lr"] for s in prt_dump.optimizer_settings(plans.parc, os.path.join(plans.examples,
                                                                                  "tiny_3d.par")).values())
    for name in RESHARD_TO:
        loss = os.path.join(d, name + ".loss")
        out = plans.run(name, ["--steps", "10", "--resume", os.path.join(ck, "step-000000005")],
                        {"PRT_LOSS_FILE": loss, "PRT_DUMP_DIR": os.path.join(d, name)})[1]
        got = prt_dump.read_losses(loss)
        worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(6, 11)) if sorted(got) == list(range(6, 11)) \
            else float("inf")
        check(worst <= LOSS_TOL, f"reshard tiny_3d@5 -> {name}: losses 6..10 within {LOSS_TOL} (worst {worst:.2e})")
        params = prt_dump.merge_params(os.path.join(d, name))
        bad = [k for k in ref_params if k not in params or
               float(abs(params[k] - ref_params[k]).max()) > PARAM_TOL * float(abs(ref_params[k]).max()) +
               PARAM_ATOL_LR * lr]
        check(not bad and set(params) == set(ref_params),
              f"reshard tiny_3d@5 -> {name}: final parameters equal the 3d run's ({len(bad)} tensors off)")
        check("resumed from" not in out, f"reshard -> {name}: --quiet prints no resume line")
    test_reshard_tied(plans, d)
    test_reshard_pairs(plans, d, PADDED)
    test_reshard_pairs(plans, d, UNEVEN_CHUNKS)
    test_reshard_pairs(plans, d, EXPERTS)
    test_reshard_pairs(plans, d, CONTEXT)


def test_reshard_pairs(plans, d, pairs):
    """A checkpoint resumes on another layout, continuing the saving layout's run: padded
    shards (a checkpoint holds no padding) onto even ones and back, pipeline chunks of
    unlike sizes (each layer saved under its global index) onto one rank and back,
    experts split over dp (each rank's saved under their global index) onto one rank and back,
    ZeRO shards over a context axis onto one rank and back, ZeRO-3's over the data group
    dp*cp onto ZeRO-1's over it."""
    for src, dst in pairs:
        ref_loss = os.path.join(d, src + ".ref.loss")
        plans.run(src, ["--steps", "10"], {"PRT_LOSS_FILE": ref_loss, "PRT_DUMP_DIR": os.path.join(d, src + ".ref")})
        ck = os.path.join(d, "ck_" + src)
        plans.run(src, ["--steps", "5", "--checkpoint-dir", ck, "--save-on-exit"])
        ref, ref_params = prt_dump.read_losses(ref_loss), prt_dump.merge_params(os.path.join(d, src + ".ref"))
        lr = max(s["lr"] for s in prt_dump.optimizer_settings(plans.parc, os.path.join(plans.examples,
                                                                                      src + ".par")).values())
        loss = os.path.join(d, f"{src}.{dst}.loss")
        plans.run(dst, ["--steps", "10", "--resume", os.path.join(ck, "step-000000005")],
                  {"PRT_LOSS_FILE": loss, "PRT_DUMP_DIR": os.path.join(d, f"{src}.{dst}")})
        got = prt_dump.read_losses(loss)
        worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(6, 11)) if sorted(got) == list(range(6, 11)) \
            else float("inf")
        check(worst <= LOSS_TOL, f"reshard {src}@5 -> {dst}: losses 6..10 within {LOSS_TOL} (worst {worst:.2e})")
        params = prt_dump.merge_params(os.path.join(d, f"{src}.{dst}"))
        bad = [k for k in ref_params if k not in params or
               float(abs(params[k] - ref_params[k]).max()) > PARAM_TOL * float(abs(ref_params[k]).max()) +
               PARAM_ATOL_LR * lr]
        check(not bad and set(params) == set(ref_params),
              f"reshard {src}@5 -> {dst}: final parameters equal {src}'s ({len(bad)} tensors off)")
        with open(os.path.join(ck, "step-000000005", "manifest.json")) as f:
            manifest = json.load(f)
        spans = sorted((sh["first"], sh["count"]) for entry in manifest["ranks"]
                       for tname, sh in entry["tensors"].items() if tname == "wte")
        covered, end = set(spans), 0
        for first, count in sorted(covered):  # replicas repeat a span; shards tile the table
            end = first + count if first == end else -1
        check(end == 256 * 64, f"checkpoint of {src}: the embedding's shards tile its 16384 elements, "
              f"no padding saved ({spans})")


def test_reshard_tied(plans, d):
    """The last stage's copy of a tied table is saved under the table's name like a
    replica; resuming on one stage or with tp reads it from either end."""
    ref_loss = os.path.join(d, "tied.loss")
    plans.run(TIED_FROM, ["--steps", "10"], {"PRT_LOSS_FILE": ref_loss, "PRT_DUMP_DIR": os.path.join(d, "tied")})
    ck = os.path.join(d, "ck_tied")
    plans.run(TIED_FROM, ["--steps", "5", "--checkpoint-dir", ck, "--save-on-exit"])
    ref, ref_params = prt_dump.read_losses(ref_loss), prt_dump.merge_params(os.path.join(d, "tied"))
    lr = max(s["lr"] for s in prt_dump.optimizer_settings(plans.parc, os.path.join(plans.examples,
                                                                                  TIED_FROM + ".par")).values())
    for name in TIED_TO:
        loss = os.path.join(d, name + ".tied.loss")
        plans.run(name, ["--steps", "10", "--resume", os.path.join(ck, "step-000000005")],
                  {"PRT_LOSS_FILE": loss, "PRT_DUMP_DIR": os.path.join(d, name + ".tied")})
        got = prt_dump.read_losses(loss)
        worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(6, 11)) if sorted(got) == list(range(6, 11)) \
            else float("inf")
        check(worst <= LOSS_TOL, f"reshard {TIED_FROM}@5 -> {name}: losses 6..10 within {LOSS_TOL} (worst {worst:.2e})")
        params = prt_dump.merge_params(os.path.join(d, name + ".tied"))
        bad = [k for k in ref_params if k not in params or
               float(abs(params[k] - ref_params[k]).max()) > PARAM_TOL * float(abs(ref_params[k]).max()) +
               PARAM_ATOL_LR * lr]
        check(not bad and set(params) == set(ref_params),
              f"reshard {TIED_FROM}@5 -> {name}: final parameters equal the pipelined run's ({len(bad)} tensors off)")


def test_kill(plans, work):
    d = os.path.join(work, "kill")
    os.makedirs(d)
    ck = os.path.join(d, "ck")
    rc, out = plans.run("tiny_tp", ["--steps", "10", "--checkpoint-dir", ck, "--checkpoint-every", "2"],
                        {"PRT_TEST_CKPT_DIE": "6"}, expect=None)
    check(rc != 0, f"kill: a rank killed inside the save of step 6 fails the job (exit {rc})")
    check(open(os.path.join(ck, "latest")).read().strip() == "step-000000004",
          "kill: latest still names step 4's checkpoint")
    check(os.path.isdir(os.path.join(ck, ".tmp.step-000000006")) and not os.path.exists(
        os.path.join(ck, "step-000000006")), "kill: the killed save left only its temporary directory")
    full = os.path.join(d, "full.loss")
    plans.run("tiny_tp", ["--steps", "8"], {"PRT_LOSS_FILE": full})
    res = os.path.join(d, "res.loss")
    plans.run("tiny_tp", ["--steps", "8", "--checkpoint-dir", ck, "--resume", "latest", "--checkpoint-every", "6"],
              {"PRT_LOSS_FILE": res})
    check(open(res).read().splitlines() == open(full).read().splitlines()[4:],
          "kill: resuming from step 4 reproduces steps 5..8 exactly")
    check(not os.path.exists(os.path.join(ck, ".tmp.step-000000006")) and
          os.path.isdir(os.path.join(ck, "step-000000006")), "kill: the next save of step 6 replaced the leftover")


def expect_error(plans, name, ck, text, what):
    rc, out = plans.run(name, ["--steps", "8", "--resume", ck], expect=None)
    texts = text if isinstance(text, tuple) else (text,)
    check(rc == 2 and any(t in out for t in texts), f"corrupt: {what}: exit 2 and '{text}' (got exit {rc}: "
          f"{out.strip().splitlines()[-1] if out.strip() else ''})")


def test_corrupt(plans, work):
    d = os.path.join(work, "corrupt")
    os.makedirs(d)
    for args, text in ((["--save-on-exit"], "--save-on-exit needs --checkpoint-dir DIR"),
                       (["--resume", "latest"], "--resume latest needs --checkpoint-dir DIR"),
                       (["--resume", os.path.join(d, "none")], "not a checkpoint (no manifest.json)"),
                       (["--checkpoint-dir", d, "--checkpoint-every", "0"], "--checkpoint-every needs a whole number"),
                       (["--checkpoint-dir", "/dev/full/ck"], "--checkpoint-dir /dev/full/ck: cannot create")):
        rc, out = plans.run("tiny_tp", ["--steps", "2"] + args, expect=None)
        check(rc == 2 and text in out and "step 1" not in out,
              f"options: {' '.join(args)}: exit 2 before any step with '{text}' (exit {rc})")
    base = os.path.join(d, "base")
    plans.run("tiny_tp", ["--steps", "3", "--checkpoint-dir", base, "--save-on-exit"])
    good = os.path.join(base, "step-000000003")

    def copy(tag):
        dst = os.path.join(d, tag)
        shutil.copytree(good, dst)
        return dst

    c = copy("flip")
    f = os.path.join(c, "rank-00001.safetensors")
    raw = bytearray(read(f))
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    name = sorted(k for k in header if k != "__metadata__")[0]
    begin = 8 + hlen + header[name]["data_offsets"][0]
    raw[begin + 5] ^= 0x40
    open(f, "wb").write(raw)
    expect_error(plans, "tiny_tp", c, f"{f}: tensor {name}: checksum mismatch", "a flipped byte")
    c = copy("trunc")
    f = os.path.join(c, "rank-00000.safetensors")
    os.truncate(f, os.path.getsize(f) - 100)
    expect_error(plans, "tiny_tp", c, f"{f}: truncated: tensor ", "a truncated file")
    c = copy("missing")
    f = os.path.join(c, "rank-00001.safetensors")
    os.remove(f)
    expect_error(plans, "tiny_tp", c, f"{f}: missing (the file of rank 1 of the 2", "a deleted rank file")
    expect_error(plans, "tiny_llama", good, ("the checkpoint has no tensor", "it cannot continue that run",
                                             "another model shape"), "another model")


def test_signal(plans, work):
    d = os.path.join(work, "signal")
    os.makedirs(d)
    ck, loss = os.path.join(d, "ck"), os.path.join(d, "run.loss")
    p = plans.run("tiny_tp", ["--steps", "100000", "--checkpoint-dir", ck], {"PRT_LOSS_FILE": loss}, popen=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not os.path.exists(loss) or len(open(loss).read().splitlines()) < 3):
        time.sleep(0.2)
    t0 = time.time()
    # The ranks themselves get the SIGTERM (as a batch system's signal to every task does): mpirun, signalled,
    # SIGKILLs them odls_base_sigkill_timeout seconds (1 by default) after forwarding it.
    ranks = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    for pid in ranks:
        os.kill(int(pid), signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    took = time.time() - t0
    lines = open(loss).read().splitlines()
    k = len(lines)
    check(len(ranks) == 2 and took < 30 and p.returncode != 0,
          f"signal: SIGTERM to the {len(ranks)} ranks stops the run in {took:.1f} s (exit {p.returncode})")
    check(f"SIGTERM: stopped after step {k}; resume with --resume latest" in out,
          f"signal: the run says it stopped after step {k}")
    check(open(os.path.join(ck, "latest")).read().strip() == f"step-{k:09d}", f"signal: a checkpoint of step {k}")
    full, res = os.path.join(d, "full.loss"), os.path.join(d, "res.loss")
    plans.run("tiny_tp", ["--steps", str(k + 3)], {"PRT_LOSS_FILE": full})
    plans.run("tiny_tp", ["--steps", str(k + 3), "--checkpoint-dir", ck, "--resume", "latest"],
              {"PRT_LOSS_FILE": res})
    check(lines + open(res).read().splitlines() == open(full).read().splitlines(),
          f"signal: steps 1..{k} and the resumed {k + 1}..{k + 3} equal an uninterrupted run")


def read_safetensors(path):
    """A plain safetensors reader: {name: (dtype, shape, numpy array)}, __metadata__ apart."""
    raw = read(path)
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        data = raw[8 + hlen + b:8 + hlen + e]
        if t["dtype"] == "F32":
            a = np.frombuffer(data, dtype="<f4")
        elif t["dtype"] == "BF16":  # widened exactly: bf16 is the high half of an fp32
            a = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name}: unexpected dtype {t['dtype']}")
        out[name] = (t["dtype"], t["shape"], a)
    return out, meta


def export_name(name, layer):
    return f"h.{layer}.{name}" if layer >= 0 else name


def test_export(plans, work):
    d = os.path.join(work, "export")
    os.makedirs(d)
    ck = os.path.join(d, "ck")
    plans.run("tiny_3d", ["--steps", "10", "--checkpoint-dir", ck, "--save-on-exit"],
              {"PRT_DUMP_DIR": os.path.join(d, "3d")})
    plans.run("tiny_single", ["--steps", "10"], {"PRT_DUMP_DIR": os.path.join(d, "single")})
    out = os.path.join(d, "model.safetensors")
    r = subprocess.run([plans.parc, "export", ck, "-o", out, "--names", "parc"], capture_output=True, text=True)
    check(r.returncode == 0, f"export: parc export exits 0 ({r.returncode}: {r.stderr.strip()})")
    tensors, meta = read_safetensors(out)
    check(meta.get("step") == "10" and meta.get("format") == "pt", f"export: metadata step 10, format pt ({meta})")
    shapes = prt_dump.param_shapes(plans.parc, os.path.join(plans.examples, "tiny_3d.par"))
    mine, single = prt_dump.merge_params(os.path.join(d, "3d")), prt_dump.merge_params(os.path.join(d, "single"))
    lr = max(s["lr"] for s in prt_dump.optimizer_settings(plans.parc, os.path.join(plans.examples,
                                                                                  "tiny_3d.par")).values())
    want = {export_name(n, l): k for (n, l), k in ((key, key) for key in mine)}
    check(set(tensors) == set(want), f"export: the file holds exactly the model's {len(want)} parameters "
          f"({len(tensors)} tensors)")
    bad_shape = [n for n, k in want.items() if n in tensors and tensors[n][1] != shapes[k[0]][1]]
    check(not bad_shape, f"export: every tensor has its global shape ({bad_shape[:3]} differ)")
    exact = [n for n, k in want.items() if n in tensors and not np.array_equal(tensors[n][2], mine[k])]
    check(not exact, f"export: every tensor equals the 3d run's final parameters bitwise ({exact[:3]} differ)")
    off = [n for n, k in want.items() if n in tensors and float(np.abs(tensors[n][2] - single[k]).max()) >
           PARAM_TOL * float(np.abs(single[k]).max()) + PARAM_ATOL_LR * lr]
    check(not off, f"export: every tensor equals the single-rank model within the parity tolerance ({off[:3]})")
    ck16 = os.path.join(d, "ck16")
    plans.run("tiny_bf16_3d", ["--steps", "4", "--checkpoint-dir", ck16, "--save-on-exit"])
    o16, o32 = os.path.join(d, "bf16.safetensors"), os.path.join(d, "master.safetensors")
    r16 = subprocess.run([plans.parc, "export", ck16, "-o", o16, "--names", "parc"], capture_output=True, text=True)
    r32 = subprocess.run([plans.parc, "export", ck16, "-o", o32, "--master", "--names", "parc"], capture_output=True,
                         text=True)
    t16, _ = read_safetensors(o16)
    t32, _ = read_safetensors(o32)
    rounded = all(t16[n][0] == "BF16" and t32[n][0] == "F32" and np.array_equal(
        t16[n][2], (((t32[n][2].view(np.uint32).astype(np.uint64) + 0x7FFF +
                      ((t32[n][2].view(np.uint32) >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32))
        for n in t16) if r16.returncode == 0 and r32.returncode == 0 and set(t16) == set(t32) and t16 else False
    check(rounded, "export: bf16 weights are the round-to-nearest-even of the --master fp32 export")
    bad = subprocess.run([plans.parc, "export", os.path.join(d, "nothing"), "-o", out], capture_output=True,
                         text=True)
    check(bad.returncode == 1 and "not a checkpoint" in bad.stderr, "export: a directory without a checkpoint is "
          f"an error ({bad.returncode}: {bad.stderr.strip()})")
    full = subprocess.run([plans.parc, "export", ck, "-o", "/dev/full/x.safetensors"], capture_output=True, text=True)
    check(full.returncode == 3 and "/dev/full/x.safetensors" in full.stderr,
          f"export: an unwritable output exits 3 naming it ({full.returncode}: {full.stderr.strip()})")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    parc, examples = sys.argv[1], sys.argv[2]
    parts = sys.argv[3:] or ["exact", "reshard", "kill", "corrupt", "signal", "export"]
    work = tempfile.mkdtemp(prefix="parc_ckpt_")
    plans = Plans(parc, examples, work)
    for part in parts:
        globals()["test_" + part](plans, work)
    if failures:
        print(f"test_ckpt: {len(failures)} failures (work in {work})")
        return 1
    shutil.rmtree(work)
    print("test_ckpt: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
