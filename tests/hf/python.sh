#!/usr/bin/env bash
# Runs a test script with .venv-hf's Python (transformers, safetensors: .ci/pyenv).
# Without it the test fails, naming the command that creates it: a reference
# that is missing is not a pass.
root=$(cd "$(dirname "$0")/../.." && pwd)
py=$root/.venv-hf/bin/python
if ! "$py" -c "import transformers, safetensors" 2>/dev/null; then
    echo "FAIL: $py cannot import transformers and safetensors: run .ci/pyenv (tests/hf/requirements.txt)" >&2
    exit 1
fi
exec "$py" "$@"
