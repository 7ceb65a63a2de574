#!/usr/bin/env bash
# one_driver.sh SRCDIR — the driver is the only caller of passes.  The entry
# points are read off the pass table itself: every function the `run_*`
# functions of compiler/pipeline/passes.c call (less the driver's own helpers).  No
# compiler source calls one, except passes.c and the file that defines it.
# Exit status: 0 held, 1 a call outside the driver (each listed).
set -u
src=$(realpath "$1")
python3 - "$src" <<'PY'
import pathlib, re, sys
root = pathlib.Path(sys.argv[1])
compiler = root / "compiler"
sources = sorted(p for p in compiler.rglob("*.c"))
driver = next(p for p in sources if p.name == "passes.c")
strings = re.compile(r'"(?:\\.|[^"\\])*"')
text = strings.sub('""', driver.read_text())
helpers = {"arena_alloc", "diag_error_count", "passes_run_plan", "passes_find", "passes_finish", "balance_wanted",
           "PARC_BUG", "PARC_ASSERT", "sizeof", "if", "return", "for", "_Static_assert"}
entries = set()
# top-level definitions start at column 0; a run_ function's body is its chunk
chunks = re.split(r"\n(?=[A-Za-z/])", text)
for chunk in chunks:
    m = re.match(r"static int (run_\w+)\(Compilation \*c\)\s*\{(.*)\}\s*$", chunk, re.S)
    if not m:
        continue
    for call in re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", m.group(2)):
        if call not in helpers and not call.startswith("run_"):
            entries.add(call)
if len(entries) < 8:
    print(f"FAIL: only {len(entries)} pass entry points found in {driver}: {sorted(entries)}")
    sys.exit(1)
bad = 0
for path in sources:
    if path == driver:
        continue
    body = path.read_text()
    defined = set(re.findall(r"^[A-Za-z][\w \*]*?\b(\w+)\([^;]*\)\s*\{", body, re.M))
    for no, line in enumerate(body.splitlines(), 1):
        code = strings.sub('""', line).split("//")[0]
        if code.lstrip().startswith(("*", "/*")):
            continue
        for e in entries:
            if e in defined:
                continue
            if re.search(r"\b%s\s*\(" % e, code):
                print(f"FAIL: {path.relative_to(root)}:{no}: calls the pass entry {e} outside the driver: {line.strip()}")
                bad += 1
print(f"one_driver: {len(entries)} pass entry points ({', '.join(sorted(entries))}); "
      f"{len(sources) - 1} sources outside the driver; {bad} calls outside it")
sys.exit(1 if bad else 0)
PY
