#!/usr/bin/env bash
# advice.sh PARC PLAN... — every change the fit advice of `parc check PLAN`
# weighs is the plan its own `check` analyzes: each advised line
# ("zero 3 over dp -> 87.5 GiB per GPU", "(fits)" or not) is applied to the
# plan's text, and the changed plan's own check must report the same bytes
# per GPU and fit exactly when the advice said it fits.  The plans must not
# fit (so there is advice) and must not include other files.
# Exit status: 0 all held, 1 any did not.
set -u
parc=$(realpath "$1"); shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$parc" "$tmp" "$@" <<'PY'
import re, subprocess, sys
parc, tmp, plans = sys.argv[1], sys.argv[2], sys.argv[3:]
fails = checked = 0

def check(path):
    r = subprocess.run([parc, "check", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr

def set_layout(text, key, stmt):
    """The layout section with `key ...;` replaced by stmt, or stmt added."""
    start = text.index("layout {")
    end = text.index("}", start)
    body = text[start:end]
    if re.search(r"\b%s\b[^;]*;" % key, body):
        body = re.sub(r"\b%s\b[^;]*;" % key, stmt, body, count=1)
    else:
        body = body.rstrip() + "\n  " + stmt + "\n"
    return text[:start] + body + text[end:]

def apply(text, change):
    if change.startswith("zero "):
        return set_layout(text, "zero", change + ";")
    if change.startswith("recompute "):
        return set_layout(text, "recompute", change + ";")
    if change == "micro_batch halved":
        m = re.search(r"micro_batch (\d+);", text)
        return text[:m.start()] + "micro_batch %d;" % (int(m.group(1)) // 2) + text[m.end():]
    raise SystemExit(f"FAIL: the advice names a change this test does not know: {change}")

line = re.compile(r"^\s+((?:zero \d over \w+)|(?:recompute \w+)|(?:micro_batch halved))\s+-> (\S+ \S+) per GPU( \(fits.*\))?$")
for plan in plans:
    text = open(plan).read()
    rc, out = check(plan)
    advice = [m.groups() for m in map(line.match, out.splitlines()) if m]
    if rc != 1 or not advice:
        print(f"FAIL: {plan}: expected a plan that does not fit, with advice (exit {rc}):\n{out}")
        fails += 1
        continue
    for change, figure, fits in advice:
        checked += 1
        variant = f"{tmp}/variant.par"
        open(variant, "w").write(apply(text, change))
        vrc, vout = check(variant)
        m = re.search(r"peak (\S+ \S+) of", vout) if vrc == 0 else re.search(r"needs (\S+ \S+), the GPU holds", vout)
        own = m.group(1) if m else None
        if own != figure or (vrc == 0) != bool(fits):
            print(f"FAIL: {plan}: the advice says `{change}` -> {figure}{fits or ''}; the changed plan's own check "
                  f"exits {vrc} with {own}:\n{vout}")
            fails += 1
        else:
            print(f"{plan}: `{change}` -> {figure}{' fits' if fits else ''}: the changed plan's own check agrees")
print(f"advice: {checked} advised changes checked, {fails} failed")
sys.exit(1 if fails or not checked else 0)
PY
