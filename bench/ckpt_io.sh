#!/usr/bin/env bash
# Checkpoint bandwidth: a GPT of 7.2 M parameters (hidden 384, 4 layers; weights and
# both Adam moments, fp32: 87 MB) on 2 tensor-parallel ranks saves (--save-on-exit)
# and loads (--resume) its checkpoint; the peer, measured in the same run on the
# same disk, is one plain loop of 1 MiB write() calls of the same number of bytes
# into one file followed by fsync (and, for loads, one loop of 1 MiB read() calls
# over the same files).  Prints MB/s of each and the ratios parc / peer (best of 3).
# The save includes CRC-32s, the manifest, the fsyncs and the renames; the load the
# manifest parse, CRC-32 checks and resharding copies.  Loads read from the page
# cache on both sides (the files were just written).
set -euo pipefail
parc=$(realpath "${1:-build/parc}")
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${BENCH_TMPDIR:-$root/build}/ckpt_io.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpirun=${PARC_MPIRUN:-mpirun}
cat > "$tmp/plan.par" <<'PLAN'
model bench_gpt { vocab 256; seq 32; hidden 384; heads 6; ffn 1536; layers 4;
  embed positions learned; repeat layers { block gpt2; } norm layer; head untied; loss cross_entropy; }
cluster { nodes 1; gpus_per_node 2; gpu { memory 8 GiB; bf16 1 TFLOP/s; fp32 1 TFLOP/s; hbm 100 GB/s; }
  link intra 10 GB/s 5 us; }
train { batch 4; micro_batch 2; precision fp32; optimizer adamw lr 1e-3; steps 1; seed 1; }
mesh { tp 2; }
layout { heads -> tp; ffn -> tp; vocab -> tp; }
PLAN
"$parc" build "$tmp/plan.par" -o "$tmp/prog" > /dev/null
best_save=999999 best_load=999999
for i in 1 2 3; do
    rm -rf "$tmp/ck"
    out=$("$mpirun" -np 2 --oversubscribe "$tmp/prog" --steps 1 --checkpoint-dir "$tmp/ck" --save-on-exit)
    ms=$(sed -n 's/^checkpoint .*(step 1, \([0-9.]*\) ms)$/\1/p' <<< "$out")
    best_save=$(python3 -c "print(min($best_save, $ms))")
    out=$("$mpirun" -np 2 --oversubscribe "$tmp/prog" --steps 1 --checkpoint-dir "$tmp/ck" --resume latest)
    ms=$(sed -n 's/^resumed from .*(step 1, \([0-9.]*\) ms)$/\1/p' <<< "$out")
    best_load=$(python3 -c "print(min($best_load, $ms))")
done
python3 - "$tmp" "$best_save" "$best_load" <<'PY'
import glob, os, sys, time
tmp, save_ms, load_ms = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
files = sorted(glob.glob(os.path.join(tmp, "ck", "step-*", "*")))
total = sum(os.path.getsize(f) for f in files)
chunk = b"\x5a" * (1 << 20)
def peer_write():
    t0 = time.perf_counter()
    fd = os.open(os.path.join(tmp, "peer.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    left = total
    while left > 0:
        left -= os.write(fd, chunk[:min(left, len(chunk))])
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t0
def peer_read():
    t0 = time.perf_counter()
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    return time.perf_counter() - t0
w = min(peer_write() for _ in range(3))
r = min(peer_read() for _ in range(3))
mb = total / 1e6
print(f"checkpoint: {len(files)} files, {mb:.1f} MB (2 ranks, tp 2)")
print(f"save: parc {mb / (save_ms / 1e3):8.1f} MB/s   peer write loop + fsync {mb / w:8.1f} MB/s   "
      f"ratio {w / (save_ms / 1e3):.2f}")
print(f"load: parc {mb / (load_ms / 1e3):8.1f} MB/s   peer read loop          {mb / r:8.1f} MB/s   "
      f"ratio {r / (load_ms / 1e3):.2f}")
PY
