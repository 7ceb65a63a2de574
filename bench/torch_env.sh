#!/usr/bin/env bash
# Creates .venv-torch/, a Python of its own with the current PyTorch from the
# Python package index (bench/requirements-torch.txt), for the speed
# benchmarks' strongest peer: eager and torch.compile train steps
# (bench/torch_gpt.py --compile).  Benchmark only; the tests never use it.
# Safe to run again: it installs nothing when the pinned torch is there.
# Prints the venv's python on its last line.
# Usage: bench/torch_env.sh   (env PARC_TORCH_VENV: another place for it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${PARC_TORCH_VENV:-$root/.venv-torch}
req=$root/bench/requirements-torch.txt
want=$(sed -n 's/^torch==//p' "$req")
have() { "$venv/bin/python" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != sys.argv[1])' "$want" 2> /dev/null; }
if ! { [ -x "$venv/bin/python" ] && have; }; then
    echo "torch_env: creating $venv with torch $want (about 3 GB with its CUDA libraries, once)" >&2
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
    have || { echo "torch_env: $venv lacks torch $want" >&2; exit 1; }
fi
echo "$venv/bin/python"
