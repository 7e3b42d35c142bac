#!/bin/bash
# Helper cpuattn (issue 28, session 20): cpu attention, kdsl vs torch SDPA (CPU, all cores).
# From the repository root:   bash .devrun/cpuattn2/run.sh      (writes to ${OUT:-/tmp})
# Installs the checkout (no deps), then one process: the issue's row f32 B*H=32 N=2048 D=64
# (causal and not), N=1024/4096 x D=64/128, and the issue's row under the schedule's old
# switches (before/after in the same run).  Every row is checked against numpy float64 and
# torch first.  About 1-2 minutes on 16 cores (a 150 s budget leaves rows out past it); a one-thread pair at the end.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda \
    > "$out/pip.txt" 2>&1 || echo "pip install failed (see pip.txt); running from the checkout"
export KDSL_CACHE=0
{
echo "== $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo); $(git log --oneline -1)"
timeout 170 python3 .devrun/cpuattn2/bench.py "$out"
echo "== rc $?"
} 2>&1 | grep -v "Warning\|^  out = " | tee "$out/cpuattn2.txt"
