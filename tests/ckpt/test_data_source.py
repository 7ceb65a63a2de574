#!/usr/bin/env python3
"""test_data_source.py PARC EXAMPLES_DIR — a checkpoint records the token file
its run trained on and a resume must train on the same one.  A run of a plan
whose `data` section names a u16 token file saves step 3: the manifest names
that file (it said "synthetic"); resuming on the synthetic stream is refused
naming both (it was accepted, and the loss jumped); resuming with --data
naming the same file by another path is accepted (it was refused); and a
manifest whose step was edited is refused, since each shard says its step."""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

t = Checks("data_source")
parc, examples, check = t.parc, t.examples, t.check


def plan_text(data):
    return (f'include "{examples}/common/tiny_gpt.par";\n'
            f'cluster {{ nodes 1; gpus_per_node 2; include "{examples}/common/tiny_cluster.par"; }}\n'
            "train { batch 8; micro_batch 2; precision fp32; optimizer adamw lr 1e-3; steps 3; seed 1234; }\n"
            "mesh { dp 2; }\nlayout { batch -> dp; }\n" + data)


with tempfile.TemporaryDirectory() as tmp:
    tokens = os.path.join(tmp, "tokens.u16")
    rng = random.Random(3)
    with open(tokens, "wb") as f:
        f.write(bytes(b for _ in range(1 << 16) for b in (rng.randrange(256), 0)))
    with_file, synthetic = os.path.join(tmp, "file.par"), os.path.join(tmp, "synthetic.par")
    open(with_file, "w").write(plan_text('data { train "tokens.u16"; format u16; }\n'))
    open(synthetic, "w").write(plan_text(""))
    ck = os.path.join(tmp, "ck")

    def run(plan, *args, cwd=tmp):
        r = subprocess.run([parc, "run", plan, "--", "--quiet", "--checkpoint-dir", ck, *args], capture_output=True,
                           text=True, timeout=300, cwd=cwd)
        return r.returncode, r.stdout + r.stderr

    rc, out = run(with_file)
    check(rc == 0, f"3 steps on the plan's token file, saved ({rc}: {out.strip()[-200:]})")
    manifest = json.load(open(os.path.join(ck, "step-000000003", "manifest.json")))
    check(manifest["model"]["data"] == os.path.realpath(tokens), f"the manifest names the file: {manifest['model']}")
    rc, out = run(synthetic, "--steps", "5", "--resume", "latest")
    check(rc == 2 and "saved with data" in out and "synthetic" in out,
          f"resuming on the synthetic stream is refused, naming both ({rc}: {out.strip()[-250:]})")
    os.mkdir(os.path.join(tmp, "elsewhere"))
    rc, out = run(synthetic, "--steps", "5", "--resume", "latest", "--data", "../tokens.u16", "--data-format", "u16",
                  cwd=os.path.join(tmp, "elsewhere"))
    check(rc == 0, f"resuming with --data naming the same file by another path is accepted ({rc}: {out.strip()[-250:]})")
    path = os.path.join(ck, "step-000000005", "manifest.json")
    m = json.load(open(path))
    m["step"] = 4
    json.dump(m, open(path, "w"))
    rc, out = run(with_file, "--steps", "7", "--resume", "latest")
    check(rc == 2 and "holds step 5, but the manifest says step 4" in out,
          f"an edited manifest step is refused ({rc}: {out.strip()[-250:]})")
sys.exit(t.done())
