#!/bin/bash
# Helper cpu27 (issue 27, CPU rows): what to run on the 16-core host, from the repository root,
# once on this branch and once on main (the baseline) in the same session.
#   bash .devrun/cpu27/run.sh            # writes to ${OUT:-/tmp}
set -e
export PYTHONPATH=.
out=${OUT:-/tmp}
timeout 580 python3 benchmarks/cpu_generator.py --rounds 3 --json "$out/cpu_generator.json" | grep -v '^ \|^[{}]' | tee "$out/cpu_generator.txt"
timeout 300 python3 .devrun/cpu27/gemm_small.py --rounds 3 | tee "$out/gemm_small.txt"
timeout 300 python3 .devrun/cpu27/conv_candidates.py --rounds 3 | tee "$out/conv_candidates.txt"
