#!/usr/bin/env bash
# Three DDP captures back to back on one 2-GPU machine (nvidia-h100-x2), for the replay's collective
# re-timing (`kernels-from:` with a twin of other buckets, docs/whatif.md): GPT-2 small ctx 512 batch 8,
# one export holding both ranks each, DDP's default 25 MB buckets (a), 1 MB buckets (b), one bucket (c).
# Not committed (sample_traces' 53 MB cap had 0.8 MB left; each export is 0.6-0.9 MB xz'd): the
# figures are in gpu_ddp_buckets.log. The 1 MB run reuses the ddp-one-bucket plant with its bucket size
# from the environment (capture/plant.py patched on the device copy only, the line below).
# Run from the repository root with .whl and .devlibs carried (devruns/preamble.sh says what they hold).
export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
sed -i 's/^ONE_BUCKET_MB = .*/ONE_BUCKET_MB = int(__import__("os").environ.get("NSIGHT_TUI_BUCKET_MB", str(1 << 20)))/' capture/plant.py
nvidia-smi -L; T0=$(date +%s); W=/tmp/ddpw; mkdir -p $W/a $W/b $W/c
D="--model small --ctx 512 --batch 8 --warmup 2 --steps 4 --ddp 2 --no-sync --no-count"
echo "=== A default 25 MB $(( $(date +%s)-T0 ))"; timeout 150 python3 -m nsight_tui capture $D --out $W/a 2>&1 | tail -4
echo "=== B 1 MB buckets $(( $(date +%s)-T0 ))"; NSIGHT_TUI_BUCKET_MB=1 timeout 150 python3 -m nsight_tui capture $D --plant ddp-one-bucket --out $W/b 2>&1 | tail -4
echo "=== C one bucket $(( $(date +%s)-T0 ))"; timeout 150 python3 -m nsight_tui capture $D --plant ddp-one-bucket --out $W/c 2>&1 | tail -4
echo "=== done $(( $(date +%s)-T0 ))"; ls -la $W/*
for x in a b c; do f=$(ls $W/$x/*.sqlite | head -1); xz -T0 -6 -c "$f" > "$OUT/${x}_$(basename "$f").xz"; done; ls -la "$OUT"
