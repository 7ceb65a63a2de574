#!/usr/bin/python3
"""test_hf_import.py — `--init-from PATH` starts a run from a Hugging Face
checkpoint that transformers itself wrote (save_pretrained), in any layout, and
the model trained in parc goes back to transformers (parc export -o DIR).
transformers is the reference (run under tests/hf/python.sh: .ci/pyenv's pinned
release), not a model written here.

usage: test_hf_import.py PARC EXAMPLES_DIR

For a tiny random GPT2LMHeadModel of tiny_gpt's sizes (untied) and its tied
twin (tiny_tied's), a tiny random LlamaForCausalLM of tiny_rope's (grouped
K/V 4/2, rope theta 500000), without and with Llama 3.1's scaling, and a tiny
random MixtralForCausalLM of tiny_moe's (4 experts of 96, top 2; one rank,
experts over dp 2, with tp 2, pp 2; its step loss with the load-balancing
loss computed from transformers' router logits):
  - step 1's loss in every layout (one rank, tp 2, pp 2 1F1B, dp 2 ZeRO-3,
    interleaved pp 2, the 8-rank 3-D layout) equals transformers' cross-entropy
    of the same model on the same batch (the run's dumped tokens and targets):
    relative 1e-5 (fp32);
  - after 5 steps of training in parc (tp 2 and dp 2 ZeRO-3) and `parc export`,
    transformers' eval-mode logits on step 6's batch equal the one-rank run's
    (relative 1e-4: the layouts' weights agree to the parity tolerances);
  - the refusals, each naming what is wrong, all at once: config.json's
    rope_theta or rope_scaling other than the plan's; a Mixtral into a dense
    plan; a model with 5 layers
    (every tensor of layer 4 named as having no place), one 128 wide (each
    tensor's expected and found shape), --init-from with --resume, a path that
    does not exist; a tied plan given an untied file names `head untied`.
"""
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt"))
from test_ckpt import Plans  # noqa: E402  (builds a plan once, runs it on its world size)
import torch  # noqa: E402
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,  # noqa: E402
                          LlamaForCausalLM, MixtralConfig, MixtralForCausalLM)

LOSS_TOL, LOGIT_TOL = 1e-5, 1e-4
LAYOUTS = ["tiny_single", "tiny_tp", "tiny_pp_1f1b", "tiny_zero3", "tiny_pp_interleaved", "tiny_3d"]
TIED_LAYOUTS = ["tiny_tied", "tiny_tied_pp", "tiny_tied_zero3"]
TRAINED = ["tiny_tp", "tiny_zero3"]
ROPE_LAYOUTS = ["tiny_rope", "tiny_rope_tp", "tiny_rope_pp", "tiny_rope_zero3"]
ROPE_TRAINED = ["tiny_rope_tp", "tiny_rope_zero3"]
MOE_LAYOUTS = ["tiny_moe", "tiny_moe_ep", "tiny_moe_ep_tp", "tiny_moe_pp"]
MOE_TRAINED = ["tiny_moe_ep"]
MOE_AUX, MOE_EXPERTS, MOE_TOP = 0.01, 4, 2  # tiny_moe's router
# Llama 3.1's scaling with an original context of 64 positions: the 8 frequency
# pairs of a 16-dim head fall in all three of its bands within 32 positions
SCALING = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
               original_max_position_embeddings=64)
T = Checks("test_hf_import")  # PARC and the second argument from sys.argv, made absolute
check = T.check


def gpt2(path, tied, layers=4, width=64, seed=0):
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=256, n_positions=32, n_embd=width, n_layer=layers, n_head=4, n_inner=4 * width,
                        activation_function="gelu_new", layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, tie_word_embeddings=tied)
    GPT2LMHeadModel(config).save_pretrained(path)
    return path


def llama(path, scaling=None, theta=500000.0, seed=0):
    """A tiny random LlamaForCausalLM of tiny_rope's sizes (GQA 4/2, untied), saved by save_pretrained."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         rope_theta=theta, rope_scaling=scaling, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         attention_bias=False, mlp_bias=False, hidden_act="silu")
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def mixtral(path, seed=0):
    """A tiny random MixtralForCausalLM of tiny_moe's sizes (GQA 4/2, 4 experts of 96, top 2, untied)."""
    torch.manual_seed(seed)
    config = MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                           rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
                           num_local_experts=MOE_EXPERTS, num_experts_per_tok=MOE_TOP,
                           router_aux_loss_coef=MOE_AUX, hidden_act="silu")
    MixtralForCausalLM(config).save_pretrained(path)
    return path


def scaled_examples(examples, work):
    """The examples with tiny_rope's fragment given Llama 3.1's scaling (SCALING)."""
    dst = os.path.join(work, "examples_scaled")
    shutil.copytree(examples, dst)
    frag = os.path.join(dst, "common", "tiny_llama_rope.par")
    text = open(frag).read()
    assert "embed positions rope theta 500000;" in text
    text = text.replace("embed positions rope theta 500000;",
                        "embed positions rope theta 500000 scaling llama3 factor 8 low_freq_factor 1 "
                        "high_freq_factor 4 original_max_positions 64;")
    open(frag, "w").write(text)
    return dst


def batch_of(dump, step):
    """The step's micro-batches (tokens, targets), each once, from rank 0's data dump."""
    seen, out = set(), []
    for st, first, tokens, targets in prt_dump.read_data(os.path.join(dump, "data.rank0.bin")):
        if st == step and first not in seen:
            seen.add(first)
            out.append((tokens.astype(np.int64), targets.astype(np.int64)))
    return out


def hf_loss(model, batch):
    with torch.no_grad():
        losses = [torch.nn.functional.cross_entropy(model(torch.from_numpy(t)).logits.flatten(0, 1).double(),
                                                    torch.from_numpy(y).flatten()).item() for t, y in batch]
    return sum(losses) / len(losses)


def hf_loss_moe(model, batch):
    """The step loss parc reports for a mixture of experts (docs/language.md): per micro-batch the
    cross-entropy plus, per layer, aux_loss x E x sum_e f_e P_e over its tokens (f_e the share of the
    top-k assignments expert e got, P_e its mean router softmax) from transformers' router logits."""
    total = 0.0
    with torch.no_grad():
        for t, y in batch:
            out = model(torch.from_numpy(t), output_router_logits=True)
            loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1).double(), torch.from_numpy(y).flatten())
            for logits in out.router_logits:  # [tokens, E] per layer
                p = torch.softmax(logits.double(), dim=-1)
                chosen = torch.topk(logits, MOE_TOP, dim=-1).indices
                f = torch.bincount(chosen.flatten(), minlength=MOE_EXPERTS).double() / chosen.numel()
                loss = loss + MOE_AUX * MOE_EXPERTS * (f * p.mean(dim=0)).sum()
            total += loss.item()
    return total / len(batch)


def test_family(r, work, layouts, tied, tag=None, src=None, trained=None, loss=hf_loss):
    tag = tag or ("tied" if tied else "untied")
    src = src or gpt2(os.path.join(work, f"gpt2_{tag}"), tied)
    trained_layouts = trained if trained is not None else (TRAINED if not tied else ["tiny_tied_zero3"])
    model = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
    ref = os.path.join(work, f"ref_{tag}")
    r.run(layouts[0], ["--steps", "6", "--init-from", src, "--checkpoint-dir", ref + ".ck", "--checkpoint-every", "5",
                       "--log", ref + ".jsonl"], {"PRT_DUMP_DIR": ref, "PRT_DUMP_STEP": "6",
                                                  "PRT_DUMP_DATA_ALL": "1", "PRT_LOSS_FILE": ref + ".loss"})
    want = loss(model, batch_of(ref, 1))
    for name in layouts:
        loss_file = os.path.join(work, f"{name}.{tag}.loss")
        r.run(name, ["--steps", "1", "--init-from", src], {"PRT_LOSS_FILE": loss_file})
        got = prt_dump.read_losses(loss_file)[1]
        rel = abs(got - want) / abs(want)
        check(rel <= LOSS_TOL, f"{tag} model imported into {name}: step 1 loss {got:.7f}, transformers' "
              f"{want:.7f} (rel {rel:.1e})")
    step6 = batch_of(ref, 6)
    logits = prt_dump.read_logits(os.path.join(ref, "logits.rank0.bin"))
    for name in trained_layouts:
        ck, out = os.path.join(work, f"{name}.{tag}.ck"), os.path.join(work, f"{name}.{tag}.hf")
        r.run(name, ["--steps", "5", "--init-from", src, "--checkpoint-dir", ck])
        e = subprocess.run([r.parc, "export", ck, "-o", out], capture_output=True, text=True)
        check(e.returncode == 0, f"{tag}: parc export of {name}'s step 5 ({e.stderr.strip()[:200]})")
        trained = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
        worst = 0.0
        with torch.no_grad():
            for (tokens, _), lg in zip(step6, logits):
                got = trained(torch.from_numpy(tokens)).logits.reshape(lg["N"], -1).double().numpy()
                ref_logits = lg["logits"].astype(np.float64)
                worst = max(worst, float(np.linalg.norm(got - ref_logits) / np.linalg.norm(ref_logits)))
        check(len(logits) == len(step6) >= 1 and worst <= LOGIT_TOL,
              f"{tag}: {name} trained 5 steps from the import, exported, in transformers: logits of step 6 equal "
              f"the one-rank run's (worst {worst:.1e} over {len(logits)} micro-batches)")


def test_refusals(r, work):
    bigger = gpt2(os.path.join(work, "gpt2_5"), False, layers=5)
    rc, out = r.run("tiny_single", ["--steps", "1", "--init-from", bigger], expect=None)
    extra = [f"transformer.h.4.{x}" for x in ("ln_1.weight", "attn.c_attn.weight", "mlp.c_proj.bias")]
    check(rc == 2 and all(x in out for x in extra) and "has no place in the plan's model" in out,
          f"a 5-layer file into the 4-layer plan: exit 2, every layer-4 tensor named ({rc}: {out.strip()[:200]})")
    wide = gpt2(os.path.join(work, "gpt2_128"), False, width=128)
    rc, out = r.run("tiny_single", ["--steps", "1", "--init-from", wide], expect=None)
    check(rc == 2 and "tensor transformer.wte.weight: the plan's model needs [256, 64]" in out and "holds [256, 128]"
          in out and out.count("the plan's model needs") >= 10,
          f"a 128-wide file: exit 2, each tensor's expected and found shape, all at once "
          f"({out.count('the plan') } named: {out.strip()[:160]})")
    untied = os.path.join(work, "gpt2_untied")
    rc, out = r.run("tiny_tied", ["--steps", "1", "--init-from", untied], expect=None)
    check(rc == 2 and "lm_head.weight" in out and "`head untied`" in out,
          f"an untied file into a tied plan names `head untied` ({rc}: {out.strip()[:200]})")
    rc, out = r.run("tiny_single", ["--steps", "1", "--init-from", untied, "--resume", untied], expect=None)
    check(rc == 2 and "--init-from and --resume" in out, f"--init-from with --resume is refused ({out.strip()[:120]})")
    other = llama(os.path.join(work, "llama_theta"), theta=10000.0)
    rc, out = r.run("tiny_rope", ["--steps", "1", "--init-from", other], expect=None)
    check(rc == 2 and "config.json: rope_theta 10000, the plan's model has 500000" in out,
          f"a Llama of another rope_theta is refused, naming both ({rc}: {out.strip()[:200]})")
    rc, out = r.run("tiny_rope", ["--steps", "1", "--init-from", os.path.join(work, "llama_scaled")], expect=None)
    check(rc == 2 and "rope_scaling llama3, the plan's model does not scale" in out,
          f"a scaled Llama into an unscaled plan is refused ({rc}: {out.strip()[:200]})")
    rc, out = r.run("tiny_rope", ["--steps", "1", "--init-from", os.path.join(work, "mixtral")], expect=None)
    check(rc == 2 and "config.json: a Mixtral (a mixture of experts), the plan's model dense" in out,
          f"a Mixtral into a dense Llama plan is refused ({rc}: {out.strip()[:200]})")
    rc, out = r.run("tiny_moe_every", ["--steps", "1", "--init-from", os.path.join(work, "mixtral")], expect=None)
    want = ("config.json: a Mixtral has a mixture of experts in every layer, the plan's model in one layer of every 2 "
            "(`every 2`): `every 1` loads it")
    check(rc == 2 and want in out, f"a Mixtral into a plan with a mixture every 2 layers says so ({rc}: "
          f"{out.strip()[:300]})")
    rc, out = r.run("tiny_single", ["--steps", "1", "--init-from", os.path.join(work, "nowhere")], expect=None)
    check(rc == 2 and "nowhere: No such file or directory" in out, f"a missing path is named ({out.strip()[:120]})")


def main():
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="parc_hf_import_")
    r = Plans(T.parc, T.examples, work)
    try:
        test_family(r, work, LAYOUTS, False)
        test_family(r, work, TIED_LAYOUTS, True)
        test_family(r, work, ROPE_LAYOUTS, False, "Llama (GQA, rope theta 500000)",
                    llama(os.path.join(work, "llama")), ROPE_TRAINED)
        scaled = Plans(r.parc, scaled_examples(r.examples, work), os.path.join(work, "scaled"))
        os.makedirs(scaled.work)
        test_family(scaled, work, ["tiny_rope", "tiny_rope_tp", "tiny_rope_pp", "tiny_rope_zero3"], False,
                    "Llama (GQA, rope theta 500000, Llama 3.1 scaling)",
                    llama(os.path.join(work, "llama_scaled"), SCALING), ["tiny_rope_tp"])
        test_family(r, work, MOE_LAYOUTS, False, "Mixtral (4 experts, top 2)", mixtral(os.path.join(work, "mixtral")),
                    MOE_TRAINED, hf_loss_moe)
        test_refusals(r, work)
    except (RuntimeError, ValueError, OSError, KeyError) as e:
        check(False, f"{type(e).__name__}: {e}")
    if T.fails:
        print(f"work in {work}")
    else:
        shutil.rmtree(work)
    return T.done()


if __name__ == "__main__":
    sys.exit(main())
