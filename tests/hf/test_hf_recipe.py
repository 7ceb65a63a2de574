#!/usr/bin/python3
"""test_hf_recipe.py — the README's "Fine-tune a Hugging Face model" recipe, with
transformers as the judge.

usage: test_hf_recipe.py PARC ROOT

In a scratch directory: tokenize the text recipe's text (tools/tokenize.py, the
512-piece BPE of examples/gpt_text.par), make a LlamaForCausalLM of
examples/llama_text.par's sizes with tools/hf_model.py, train the plan (tp 2 x
dp 2, 50 steps) from it with --init-from, export the checkpoint with
`parc export -o DIR`, load that with AutoModelForCausalLM.from_pretrained.
Asserts, each against transformers' own forward on the validation file's
windows the run evaluated (its first 64 windows of seq + 1 tokens, seq apart):
  - parc's step-0 val_loss equals transformers' loss of the model it started
    from (relative 1e-5): the import is that model;
  - parc's step-50 val_loss equals transformers' loss of the exported model
    (relative 1e-4): the export is the trained model;
  - training helped: the exported model's loss is below the start's by 10 %.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from runcheck import Checks  # noqa: E402

T = Checks("test_hf_recipe")  # PARC and ROOT from sys.argv, made absolute
check = T.check


def val_loss(model_dir, tokens, seq, windows):
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    losses = []
    with torch.no_grad():
        for w in range(windows):
            x = torch.from_numpy(tokens[w * seq:w * seq + seq + 1].astype(np.int64))
            logits = model(x[None, :-1]).logits[0]
            losses.append(torch.nn.functional.cross_entropy(logits.double(), x[1:]).item())
    return float(np.mean(losses))


def main():
    parc, root = T.parc, T.examples
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="parc_hf_recipe_")
    ex = os.path.join(work, "examples")
    os.makedirs(os.path.join(ex, "common"))
    shutil.copy(os.path.join(root, "examples", "llama_text.par"), ex)
    shutil.copy(os.path.join(root, "examples", "gpt_text.par"), ex)
    shutil.copy(os.path.join(root, "examples", "common", "tiny_cluster.par"), os.path.join(ex, "common"))
    py = sys.executable
    steps = [
        [py, os.path.join(root, "tools", "tokenize.py"), os.path.join(root, "tests", "data", "genesis_kjv.txt"),
         os.path.join(ex, "gpt_text"), "--plan", os.path.join(ex, "gpt_text.par"), "--parc", parc],
        [py, os.path.join(root, "tools", "hf_model.py"), os.path.join(ex, "llama_text.par"),
         os.path.join(work, "llama-start"), "--parc", parc],
        [parc, "run", os.path.join(ex, "llama_text.par"), "--init-from", os.path.join(work, "llama-start"),
         "--checkpoint-dir", os.path.join(work, "ck-llama"), "--log", os.path.join(work, "log.jsonl")],
        [parc, "export", os.path.join(work, "ck-llama"), "-o", os.path.join(work, "llama-tuned")],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
        check(r.returncode == 0, f"{os.path.basename(cmd[1] if cmd[0] == py else cmd[1])}: exit {r.returncode} "
              f"{(r.stdout + r.stderr)[-600:] if r.returncode else ''}")
        if r.returncode:
            return T.done()
    records = [json.loads(x) for x in open(os.path.join(work, "log.jsonl"))]
    evals = {r["step"]: r["val_loss"] for r in records if r.get("val_loss") is not None and "step" in r}
    with open(os.path.join(ex, "gpt_text", "val.bin"), "rb") as f:
        raw = f.read()
    tokens = np.frombuffer(raw, dtype="<u2", offset=256 * 4)
    seq, windows = 64, 4 * 16
    start = val_loss(os.path.join(work, "llama-start"), tokens, seq, windows)
    tuned = val_loss(os.path.join(work, "llama-tuned"), tokens, seq, windows)
    e0, e50 = evals.get(0), evals.get(50)
    check(e0 is not None and abs(e0 - start) / start < 1e-5,
          f"step 0: parc's val_loss {e0} equals transformers' loss of the start model {start:.6f}")
    check(e50 is not None and abs(e50 - tuned) / tuned < 1e-4,
          f"step 50: parc's val_loss {e50} equals transformers' loss of the exported model {tuned:.6f}")
    check(tuned < 0.9 * start, f"the fine-tuned model's loss {tuned:.4f} is below the start's {start:.4f} by 10 %")
    if T.fails:
        print(f"work in {work}")
    else:
        shutil.rmtree(work)
    return T.done()


if __name__ == "__main__":
    sys.exit(main())
