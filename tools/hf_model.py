#!/usr/bin/env python3
"""hf_model.py — a Hugging Face model of a plan's sizes, as transformers saves one.

usage: hf_model.py PLAN OUT_DIR [--parc PARC] [--seed N]

Reads the plan's model from `parc explain PLAN --json` (model.config: vocab,
seq, hidden, heads, kv_heads, head_dim, ffn, layers, the positions, the norms'
epsilon, a tied head) and writes a randomly initialised LlamaForCausalLM (RMS
norms, SwiGLU, rotary positions, no biases) or GPT2LMHeadModel (LayerNorm,
GELU, learned positions, biases) with transformers' own save_pretrained: a
starting point for `parc run PLAN --init-from OUT_DIR`, as a downloaded
checkpoint would be.  Runs under .venv-hf's Python (.ci/pyenv).  Exit 0, 1 on a
plan neither class fits, 2 on bad usage.
"""
import argparse
import json
import os
import subprocess
import sys

# this directory's tokenize.py would shadow the standard library's, which torch imports
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]


def main():
    ap = argparse.ArgumentParser(description="A transformers model of a plan's sizes, saved with save_pretrained.")
    ap.add_argument("plan")
    ap.add_argument("out")
    ap.add_argument("--parc", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "parc"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    r = subprocess.run([args.parc, "explain", args.plan, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"hf_model.py: parc explain {args.plan} failed:\n{r.stderr}", file=sys.stderr)
        return 1
    c = json.loads(r.stdout)["model"]["config"]
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(args.seed)
    if c["norm"] == "rms" and c["positions"] == "rope" and not c["bias"] and c["final_norm_eps"] == c["norm_eps"]:
        config = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["ffn"],
                             num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                             num_key_value_heads=c["kv_heads"], head_dim=c["head_dim"],
                             max_position_embeddings=c["seq"], rope_theta=c["rope_theta"],
                             rope_scaling=c.get("rope_scaling"), rms_norm_eps=c["norm_eps"],
                             tie_word_embeddings=c["tied_head"], attention_bias=False, mlp_bias=False,
                             hidden_act="silu")
        model = LlamaForCausalLM(config)
    elif c["norm"] == "layer" and c["positions"] == "learned" and c["bias"] and c["kv_heads"] == c["heads"]:
        config = GPT2Config(vocab_size=c["vocab"], n_positions=c["seq"], n_embd=c["hidden"], n_layer=c["layers"],
                            n_head=c["heads"], n_inner=c["ffn"], activation_function="gelu_new",
                            layer_norm_epsilon=c["norm_eps"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            tie_word_embeddings=c["tied_head"])
        model = GPT2LMHeadModel(config)
    else:
        print(f"hf_model.py: {args.plan}: neither a Llama (RMS norms, rotary positions, no biases) nor a GPT-2 "
              f"(LayerNorm, learned positions, biases): {c}", file=sys.stderr)
        return 1
    model.save_pretrained(args.out)
    print(f"hf_model.py: {type(model).__name__} of {sum(p.numel() for p in model.parameters())} parameters "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
