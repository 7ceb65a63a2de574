#!/usr/bin/python3
"""test_hf_export.py — `parc export CKPT -o DIR` writes a directory that Hugging
Face transformers loads with AutoModelForCausalLM.from_pretrained, and the loaded
model computes parc's logits.  transformers is the reference (run under
tests/hf/python.sh: .ci/pyenv's pinned release), not a model written here.

usage: test_hf_export.py PARC EXAMPLES_DIR

For tiny_single (a GPT-2 with an untied head), tiny_tied (its head tied to
the embedding), tiny_rope (a Llama: grouped K/V, rotary positions at theta
500000, loaded as LlamaForCausalLM with config.json's rope_theta and heads) and
tiny_moe (its MLP 4 SwiGLU experts, top 2 by a softmax router, loaded as
MixtralForCausalLM: the router as gate, each expert as w1, w3 and w2): 6 steps on one rank save a checkpoint at step 5 and dump step
6's tokens and logits (PRT_DUMP_STEP=6: step 6 runs on the weights saved at
step 5); the export of step 5 loads with no missing, unexpected or mismatched
weight (output_loading_info), as GPT2LMHeadModel with config.json's sizes, and
its eval-mode logits on every micro-batch of step 6 equal parc's:
||a - b|| / ||b|| < 1e-5 (fp32).  The same export in files of at most
200 KB (--max-shard-size 200KB: model-0000K-of-0000N.safetensors and the index) loads
to the same logits.  A model whose norms' epsilons differ (tiny_rope_llama31)
and a Llama without rotary positions are refused for the directory form (LlamaForCausalLM applies them), naming the .safetensors form,
and --names parc with a directory is a usage error; so are a mixture of
experts with shared experts (parc's are ungated), one of GELU experts and one
with the mixture in every second layer only (`every 2`: dense layers between).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import numpy as np  # noqa: E402
import prt_dump  # noqa: E402
from runcheck import Checks  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

LOGIT_TOL = 1e-5
T = Checks("test_hf_export")  # PARC and the second argument from sys.argv, made absolute
check = T.check


def run_and_save(parc, examples, d, name):
    """6 steps of `name`, a checkpoint at step 5, step 6's data and logits dumped."""
    plan = os.path.join(examples, name + ".par")
    exe = os.path.join(d, name)
    prt_dump.build(parc, plan, exe)
    ck, dump = os.path.join(d, "ck"), os.path.join(d, "dump")
    r = subprocess.run([exe, "--steps", "6", "--quiet", "--checkpoint-dir", ck, "--checkpoint-every", "5",
                        "--timeout", "0"], capture_output=True, text=True,
                       env=prt_dump.run_env({"PRT_DUMP_DIR": dump, "PRT_DUMP_STEP": "6"}), timeout=300)
    check(r.returncode == 0, f"{name}: 6 steps with a checkpoint at step 5 (exit {r.returncode}: {r.stderr[-300:]})")
    return os.path.join(ck, "step-000000005"), dump


def step_batches(dump):
    data, seen = [], set()  # the embedding's and the loss's prt_data calls of each micro-batch: one record each
    for rec in prt_dump.read_data(os.path.join(dump, "data.rank0.bin")):
        if rec[1] not in seen:
            seen.add(rec[1])
            data.append(rec)
    return data, prt_dump.read_logits(os.path.join(dump, "logits.rank0.bin"))


def load(name, out, arch):
    model, info = AutoModelForCausalLM.from_pretrained(out, output_loading_info=True, torch_dtype=torch.float32)
    model.eval()
    clean = not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"))
    check(type(model).__name__ == arch and clean,
          f"{name}: {os.path.basename(out)} loads as {type(model).__name__} with every weight from the files "
          f"({ {k: v for k, v in info.items() if v} or 'nothing missing or unexpected'})")
    return model


def worst_logits(model, data, logits):
    worst = 0.0
    with torch.no_grad():
        for rec, lg in zip(data, logits):
            tokens = torch.from_numpy(rec[2].astype(np.int64)).reshape(lg["N"] // rec[2].shape[-1] or 1, -1)
            got = model(tokens).logits.reshape(lg["N"], -1).double().numpy()
            want = lg["logits"].astype(np.float64)
            worst = max(worst, float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    return worst


def test_model(parc, examples, work, name, tied, arch="GPT2LMHeadModel", family="gpt2", config_want=None):
    d = os.path.join(work, name)
    os.makedirs(d)
    step, dump = run_and_save(parc, examples, d, name)
    data, logits = step_batches(dump)
    for form, extra in (("model", []), ("sharded", ["--max-shard-size", "200KB"])):
        out = os.path.join(d, form)
        e = subprocess.run([parc, "export", step, "-o", out] + extra, capture_output=True, text=True)
        check(e.returncode == 0, f"{name}: parc export -o {form}/ {' '.join(extra)} exits 0 ({e.stderr.strip()})")
        if e.returncode:
            continue
        files = sorted(os.listdir(out))
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        wanted = dict(config_want or {}, tie_word_embeddings=tied, model_type=family)
        check(all(config.get(k) == v for k, v in wanted.items()),
              f"{name}: config.json says {wanted} ({ {k: config.get(k) for k in wanted} })")
        if extra:
            with open(os.path.join(out, "model.safetensors.index.json")) as f:
                index = json.load(f)
            shards = [x for x in files if x.startswith("model-")]
            check(len(shards) > 1 and set(index["weight_map"].values()) == set(shards),
                  f"{name}: {len(shards)} files of at most 200 KB and an index naming each")
        else:
            check(files == ["config.json", "model.safetensors"], f"{name}: config.json and model.safetensors ({files})")
        model = load(name, out, arch)
        worst = worst_logits(model, data, logits)
        check(len(logits) == len(data) and len(logits) >= 1 and worst < LOGIT_TOL,
              f"{name} ({form}): transformers' logits on the {len(logits)} micro-batches of step 6 equal parc's "
              f"(worst {worst:.2e}, tolerance {LOGIT_TOL})")


def test_refusals(parc, examples, work):
    d = os.path.join(work, "llama31")
    os.makedirs(d)
    step, _ = run_and_save(parc, examples, d, "tiny_rope_llama31")
    e = subprocess.run([parc, "export", step, "-o", os.path.join(d, "hf")], capture_output=True, text=True)
    check(e.returncode == 1 and "eps 0.001 and the final norm 0.01" in e.stderr,
          f"a model whose norms' epsilons differ has no transformers config ({e.returncode}: {e.stderr.strip()[:160]})")
    d = os.path.join(work, "llama")
    os.makedirs(d)
    step, _ = run_and_save(parc, examples, d, "tiny_llama")
    out = os.path.join(d, "hf")
    e = subprocess.run([parc, "export", step, "-o", out], capture_output=True, text=True)
    check(e.returncode == 1 and "no rotary positions" in e.stderr and ".safetensors" in e.stderr
          and not os.path.exists(os.path.join(out, "config.json")),
          f"a Llama without rotary positions is refused for transformers ({e.returncode}: {e.stderr.strip()[:160]})")
    e = subprocess.run([parc, "export", step, "-o", out, "--names", "parc"], capture_output=True, text=True)
    check(e.returncode == 2 and "needs --names hf" in e.stderr,
          f"--names parc into a directory is a usage error ({e.returncode}: {e.stderr.strip()[:120]})")
    e = subprocess.run([parc, "export", step, "-o", out, "--max-shard-size", "5 GB"], capture_output=True, text=True)
    check(e.returncode == 2 and "--max-shard-size takes a size" in e.stderr,
          f"a bad --max-shard-size is a usage error ({e.returncode}: {e.stderr.strip()[:120]})")


def test_moe_refusals(parc, examples, work):
    """A mixture of experts transformers has no class for is refused, naming why."""
    for name, says in (("tiny_moe_shared", "shared experts, which parc adds ungated"),
                       ("tiny_moe_gelu", "neither a GPT-2"),
                       ("tiny_moe_every", "a dense MLP in the others (`every`)")):
        d = os.path.join(work, name)
        os.makedirs(d)
        step, _ = run_and_save(parc, examples, d, name)
        out = os.path.join(d, "hf")
        e = subprocess.run([parc, "export", step, "-o", out], capture_output=True, text=True)
        check(e.returncode == 1 and says in e.stderr and not os.path.exists(os.path.join(out, "config.json")),
              f"{name} is refused for transformers ({e.returncode}: {e.stderr.strip()[:160]})")


def main():
    parc, examples = T.parc, T.examples
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="parc_hf_export_")
    test_model(parc, examples, work, "tiny_single", False)
    test_model(parc, examples, work, "tiny_tied", True)
    test_model(parc, examples, work, "tiny_rope", False, "LlamaForCausalLM", "llama",
               dict(rope_theta=500000, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    rms_norm_eps=1e-5, rope_scaling=None, max_position_embeddings=32))
    test_model(parc, examples, work, "tiny_moe", False, "MixtralForCausalLM", "mixtral",
               dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=96, num_attention_heads=4,
                    num_key_value_heads=2, rope_theta=10000, rms_norm_eps=1e-5, router_aux_loss_coef=0.01))
    test_refusals(parc, examples, work)
    test_moe_refusals(parc, examples, work)
    if T.fails:
        print(f"work in {work}")
    else:
        shutil.rmtree(work)
    return T.done()


if __name__ == "__main__":
    sys.exit(main())
