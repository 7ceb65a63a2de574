#!/usr/bin/python3
"""tokenize.py — turn a text file into the token files a parc plan trains on.

usage: tokenize.py TEXT OUT_DIR (--vocab N | --plan PLAN [--parc PARC])
                   [--validation FRACTION]

Trains a byte-fallback BPE tokenizer (SentencePiece, Debian's
python3-sentencepiece) of N pieces — the plan's `vocab` with --plan — on the
text, encodes it, and writes into OUT_DIR:
  train.bin, val.bin   llm.c token files (256 int32 header: magic 20240520,
                       version 1, token count; then uint16 tokens): the first
                       and last FRACTION (default 0.1) of the text's lines;
  tokenizer.model      the SentencePiece model (to decode samples).
Prints the token counts.  Then, e.g.:
  data { train "OUT_DIR/train.bin"; validation "OUT_DIR/val.bin"; format llmc; }
or the program's --data OUT_DIR/train.bin --val-data OUT_DIR/val.bin --data-format llmc.
Exit 0 on success, 1 on a problem (with the reason), 2 on bad usage.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

LLMC_MAGIC, LLMC_VERSION = 20240520, 1


def write_llmc(path, tokens):
    """llm.c's token file: 256 int32 (magic, version, count, zeros), uint16 tokens."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if len(tokens) >= 2**31 or (len(tokens) and (tokens.min() < 0 or tokens.max() >= 2**16)):
        raise ValueError(f"{path}: {len(tokens)} tokens do not fit llm.c's format (uint16, fewer than 2^31)")
    header = np.zeros(256, dtype="<i4")
    header[:3] = (LLMC_MAGIC, LLMC_VERSION, len(tokens))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())
    os.replace(tmp, path)


def plan_vocab(parc, plan):
    r = subprocess.run([parc, "lower", plan, "--emit=front"], capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError(f"parc lower {plan} failed:\n{r.stderr.strip()}")
    m = re.search(r"^  vocab (\d+)$", r.stdout, re.M)
    if not m:
        raise ValueError(f"{plan}: no vocab in the resolved plan")
    return int(m.group(1))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("text")
    ap.add_argument("out_dir")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--plan")
    ap.add_argument("--parc", default="parc")
    ap.add_argument("--validation", type=float, default=0.1)
    a = ap.parse_args(argv[1:])
    if (a.vocab is None) == (a.plan is None):
        ap.error("give exactly one of --vocab N and --plan PLAN")
    if not 0 < a.validation < 1:
        ap.error("--validation must be a fraction between 0 and 1")
    try:
        import sentencepiece as spm
    except ImportError:
        print("tokenize.py: needs SentencePiece (Debian: apt-get install python3-sentencepiece)", file=sys.stderr)
        return 1
    try:
        vocab = a.vocab if a.vocab is not None else plan_vocab(a.parc, a.plan)
        if not 260 <= vocab <= 65536:
            raise ValueError(f"vocab {vocab}: a byte-fallback BPE needs 260 to 65536 pieces (256 bytes, 4 specials)")
        with open(a.text, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if len(lines) < 10:
            raise ValueError(f"{a.text}: {len(lines)} lines is too little text to split and train on")
        cut = len(lines) - max(1, int(len(lines) * a.validation))
        os.makedirs(a.out_dir, exist_ok=True)
        prefix = os.path.join(a.out_dir, "tokenizer")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines[:cut]), model_prefix=prefix, model_type="bpe", vocab_size=vocab,
            byte_fallback=True, character_coverage=1.0, num_threads=1,
            minloglevel=2, hard_vocab_limit=True, bos_id=-1, eos_id=1, unk_id=0, pad_id=-1)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        eos = sp.eos_id()
        for name, part in (("train", lines[:cut]), ("val", lines[cut:])):
            tokens = []
            for ids in sp.encode(part):
                tokens.extend(ids)
                tokens.append(eos)
            write_llmc(os.path.join(a.out_dir, name + ".bin"), tokens)
            print(f"{name}.bin: {len(tokens)} tokens from {len(part)} lines (vocab {vocab})")
    except (OSError, ValueError, RuntimeError, UnicodeDecodeError) as e:
        print(f"tokenize.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
