#!/usr/bin/env bash
# layers.sh SRCDIR — the compiler's folders are stages whose includes go one
# way.  The stages and what each may use are read off CMakeLists.txt
# (PARC_COMPILER_STAGES, PARC_STAGE_DEPS_<stage>); a source of compiler/<stage>/
# may include its own stage's headers, those of the stages it depends on
# (transitively), include/ (the runtime's ABI) and the generated parser's
# (front only).  Only codegen includes llvm-c; only main.c sits above tools.
# Exit status: 0 held, 1 an include against the direction (each listed).
set -u
src=$(realpath "$1")
python3 - "$src" <<'PY'
import pathlib, re, sys
root = pathlib.Path(sys.argv[1])
cmake = (root / "CMakeLists.txt").read_text()
stages = re.search(r"set\(PARC_COMPILER_STAGES ([^)]*)\)", cmake).group(1).split()
deps = {s: [d.removeprefix("parc_") for d in re.search(r"set\(PARC_STAGE_DEPS_%s ?([^)]*)\)" % s, cmake).group(1).replace('"', "").split()]
        for s in stages}
def closure(s, seen=None):
    seen = set() if seen is None else seen
    for d in deps[s]:
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen
compiler = root / "compiler"
home = {}
for s in stages:
    for h in (compiler / s).glob("*.h"):
        home[h.name] = s
shared = {h.name for h in (root / "include").glob("*.h")}
generated = {"par.tab.h", "par.lex.h"}
bad = checked = 0
folders = {p.name for p in compiler.iterdir() if p.is_dir()}
for extra in sorted(folders - set(stages)):
    print(f"FAIL: compiler/{extra}/ is no stage of PARC_COMPILER_STAGES")
    bad += 1
for s in stages:
    allowed = closure(s) | {s}
    for f in sorted((compiler / s).glob("*.[ch]")):
        for no, line in enumerate(f.read_text().splitlines(), 1):
            m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
            if not m:
                continue
            inc = m.group(1)
            checked += 1
            if inc.startswith("llvm-c/") and s != "codegen":
                print(f"FAIL: {f.relative_to(root)}:{no}: includes {inc}: only codegen uses LLVM")
                bad += 1
            elif inc in home and home[inc] not in allowed:
                print(f"FAIL: {f.relative_to(root)}:{no}: stage {s} includes {inc} of stage {home[inc]} "
                      f"(it may use {', '.join(sorted(allowed))})")
                bad += 1
            elif inc in generated and s != "front":
                print(f"FAIL: {f.relative_to(root)}:{no}: {inc} is the front end's")
                bad += 1
            elif '"' in line and inc not in home and inc not in shared and inc not in generated:
                print(f"FAIL: {f.relative_to(root)}:{no}: includes {inc}, which no stage and not include/ holds")
                bad += 1
for h in sorted((root / "include").glob("*.h")):
    for no, line in enumerate(h.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
        if m and m.group(1) not in shared:
            print(f"FAIL: {h.relative_to(root)}:{no}: the shared header includes {m.group(1)}")
            bad += 1
loose = sorted(p.name for p in compiler.glob("*.[ch]") if p.name != "main.c")
for name in loose:
    print(f"FAIL: compiler/{name} is in no stage's folder")
    bad += 1
order = " -> ".join(f"{s} ({', '.join(deps[s]) or 'nothing'})" for s in stages)
print(f"layers: {len(stages)} stages, {checked} includes checked, {bad} against the direction; {order}")
sys.exit(1 if bad else 0)
PY
