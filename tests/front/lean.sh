#!/usr/bin/env bash
# lean.sh PARC EXAMPLES — parc does not load LLVM: neither its ELF's NEEDED
# entries nor what the loader resolves for it (ldd) name libLLVM, while
# parc-codegen beside it does.  Commands that generate code (build, run,
# lower --emit=codegen) run parc-codegen and print what it prints, the plan
# on standard input included; the others run without it.  A parc whose
# parc-codegen is missing or cannot run says so and exits 1 for those
# commands, and still checks and explains plans; a symbolic link to parc
# finds parc-codegen beside the link's target.
set -u
parc=$(realpath "$1"); examples=$(realpath "$2")
cd "$examples" || exit 1  # a plan on standard input includes relative to the current directory
full=$(dirname "$parc")/parc-codegen
plan=$examples/tiny_single.par
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
[ -x "$full" ] || { echo "FAIL: no parc-codegen beside $parc"; exit 1; }

n=$((n + 1)); needed "$parc" | grep -qi llvm && fail "NEEDED: parc needs $(needed "$parc" | grep -i llvm | tr '\n' ' ')"
n=$((n + 1)); ldd "$parc" | grep -qi llvm && fail "ldd: parc loads $(ldd "$parc" | grep -i llvm | tr '\n' ' ')"
n=$((n + 1)); needed "$full" | grep -qi '^libLLVM' || fail "NEEDED: parc-codegen has no libLLVM entry ($(needed "$full" | tr '\n' ' ')): the check above reads nothing"

same() { # name, stdin file (or -), args...: parc and parc-codegen print the same and exit 0
    local name=$1 in=$2; shift 2
    n=$((n + 1))
    [ "$in" = - ] && in=/dev/null
    "$parc" "$@" < "$in" > "$tmp/lean.out" 2> "$tmp/lean.err"; local a=$?
    "$full" "$@" < "$in" > "$tmp/full.out" 2> "$tmp/full.err"; local b=$?
    if [ "$a" != 0 ] || [ "$b" != 0 ]; then
        fail "$name: exit $a (parc), $b (parc-codegen)"; head -5 "$tmp/lean.err" "$tmp/full.err"
    elif ! cmp -s "$tmp/lean.out" "$tmp/full.out" || ! cmp -s "$tmp/lean.err" "$tmp/full.err"; then
        fail "$name: parc and parc-codegen differ"; diff "$tmp/lean.out" "$tmp/full.out" | head -5
    elif [ ! -s "$tmp/lean.out" ]; then
        fail "$name: prints nothing"
    fi
}
same "lower --emit=codegen" - lower "$plan" --emit=codegen
same "build --emit=llvm" - build "$plan" --emit=llvm
same "build --emit=llvm of standard input" "$plan" build - --emit=llvm
same "check" - check "$plan"
n=$((n + 1))
if ! "$parc" build "$plan" -o "$tmp/plan" > "$tmp/out" 2>&1 || [ ! -x "$tmp/plan" ]; then
    fail "build -o: no executable"; head -5 "$tmp/out"
fi

# through a symbolic link, parc-codegen is found beside the link's target
mkdir "$tmp/link"
ln -s "$parc" "$tmp/link/parc"
n=$((n + 1))
"$tmp/link/parc" build "$plan" --emit=llvm > "$tmp/link.out" 2>&1 && grep -q "define i32 @main" "$tmp/link.out" ||
    { fail "build through a symbolic link to parc"; head -5 "$tmp/link.out"; }

expect() { # name, want_status, want_text (grep -E), command...
    local name=$1 want=$2 text=$3; shift 3
    n=$((n + 1))
    local out status
    out=$("$@" 2>&1); status=$?
    if [ "$status" != "$want" ] || ! printf '%s\n' "$out" | grep -qE -- "$text"; then
        fail "$name: exit $status (want $want), output lacks /$text/:"; printf '%s\n' "$out" | head -8
    fi
}
mkdir "$tmp/alone"
cp "$parc" "$tmp/alone/parc"
alone=$tmp/alone/parc
missing="^parc: cannot generate code: $tmp/alone/parc-codegen is missing \(build it with"
expect "alone: --version" 0 "^parc [0-9]" "$alone" --version
expect "alone: check" 0 "ok: 1 rank" "$alone" check "$plan"
expect "alone: explain" 0 "per GPU" "$alone" explain "$plan"
expect "alone: lower --emit=analyze" 0 "." "$alone" lower "$plan" --emit=analyze
expect "alone: usage errors stay its own" 2 "--emit takes" "$alone" lower "$plan" --emit=asm
expect "alone: build" 1 "$missing" "$alone" build "$plan" -o "$tmp/x"
expect "alone: build --emit=llvm" 1 "$missing" "$alone" build "$plan" --emit=llvm
expect "alone: run" 1 "$missing" "$alone" run "$plan" --steps 1
expect "alone: lower --emit=codegen" 1 "$missing" "$alone" lower "$plan" --emit=codegen
printf 'not a program\n' > "$tmp/alone/parc-codegen"
chmod -x "$tmp/alone/parc-codegen"
expect "alone: parc-codegen not executable" 1 "^parc: cannot generate code: cannot run $tmp/alone/parc-codegen: Permission denied" \
    "$alone" build "$plan" --emit=llvm

echo "lean: $n checks, $fails failed"
[ "$fails" = 0 ]
