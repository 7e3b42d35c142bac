#!/bin/bash
# flashgpu (issue 28 item 3): attention on tensor cores, kdsl vs torch SDPA (flash).
# Run from anywhere on the device machine (one H100/H200; torch + cupy there).
#   bash .devrun/flashgpu/run.sh          # kdsl end to end (~2 min), then the raw kernel's
#                                         # checks, tile sweep and table (~2 min more)
#   bash .devrun/flashgpu/run.sh --quick  # kdsl end to end only
#   bash .devrun/flashgpu/run.sh --raw    # the raw kernel only
# Writes $OUT/flashgpu.json (updated after every row) and $OUT/flashgpu.log.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda \
    >/dev/null 2>&1 || echo "pip install -e failed: running from the checkout (PYTHONPATH)"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
out=${OUT:-.}
timeout 290 python3 .devrun/flashgpu/bench.py "$@" 2>&1 | tee "$out/flashgpu.log"
