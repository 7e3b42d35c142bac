#!/bin/bash
# Helper cpuattn (issue 28 item 4): cpu attention against torch SDPA on the 16-core host.
# From the repository root:   bash .devrun/cpuattn/run.sh      (writes to ${OUT:-/tmp})
# One process per table; each row: kdsl's blocked default, torch SDPA and (--compare) the
# old one-row-per-item placement, all in the same run, checked against numpy float64 first.
# About 2-3 minutes on 16 cores.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=.:kdsl_cpu
out=${OUT:-/tmp}
{
echo "== $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo)"
echo "== the issue's row: f32 B*H=32 N=2048 D=64, 16 threads (default), non-causal and causal"
timeout 240 python3 benchmarks/attention.py --device cpu --n 2048 --d 64 --bh 32 --heads 8 \
    --dtype float32 --causal both --reps 5 --compare --json "$out/cpuattn_2048.json"
echo "== other sizes (no baseline): N=1024/4096, D=64/128"
timeout 240 python3 benchmarks/attention.py --device cpu --n 1024,4096 --d 64,128 --bh 32 \
    --heads 8 --dtype float32 --causal both --reps 3 --json "$out/cpuattn_sizes.json"
echo "== block sizes (kdsl_cpu/schedules/attention.py BQ, scores tile), N=2048 D=64"
timeout 200 python3 .devrun/cpuattn/sweep.py "$out/cpuattn_sweep.json"
echo "== one thread, N=2048 D=64 (per-core efficiency)"
timeout 120 python3 benchmarks/attention.py --device cpu --n 2048 --d 64 --bh 4 --heads 4 \
    --dtype float32 --causal no --reps 3 --threads 1 --json "$out/cpuattn_1t.json"
} 2>&1 | grep -v "Warning\|^  out = " | tee "$out/cpuattn.txt"
