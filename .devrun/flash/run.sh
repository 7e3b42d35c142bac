#!/bin/bash
# flash (issue 28): kdsl's flash-attention kernel vs torch SDPA (flash) on one H100/H200.
# Run from anywhere on the device machine (torch + cupy there); < 3 min.
#   bash .devrun/flash/run.sh                 # compile + ptxas -v, checks, timing, 2 e2e rows
#   bash .devrun/flash/run.sh --quick         # N 1024/4096 only, no e2e
#   bash .devrun/flash/run.sh --default       # only the tiles the default schedule picks (< 90 s)
#   FLASH_VARIANTS="64:128,64,4;128:128,64,8" bash .devrun/flash/run.sh   # other tiles
#   bash .devrun/flash/run.sh racecheck       # compute-sanitizer racecheck + memcheck, N=200
# Writes $OUT/flash.json, $OUT/flash_table.txt, $OUT/flash.log (racecheck: $OUT/racecheck.log).
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda \
    >/dev/null 2>&1 || echo "pip install -e failed: running from the checkout (PYTHONPATH)"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
out=${OUT:-.}
mkdir -p "$out"
if [ "${1:-}" = "racecheck" ]; then
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$san" ]; then
    san=$(python3 -c "import glob,os,nvidia; p=[x for d in nvidia.__path__ for x in glob.glob(os.path.join(d,'**','compute-sanitizer'),recursive=True) if os.access(x,os.X_OK)]; print(p[0] if p else '')" 2>/dev/null)
  fi
  if [ -z "$san" ]; then echo "no compute-sanitizer found" | tee "$out/racecheck.log"; exit 1; fi
  for tool in racecheck memcheck; do
    echo "== $tool ==" | tee -a "$out/racecheck.log"
    extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 250 "$san" --tool $tool $extra --error-exitcode 1 \
        python3 .devrun/flash/bench.py --racecheck-case > "$out/$tool.txt" 2>&1
    echo "$tool rc=$?" | tee -a "$out/racecheck.log"
    grep -E "SUMMARY|racecheck case|Error|error|Hazard" "$out/$tool.txt" | sort | uniq -c | head -30 \
        | tee -a "$out/racecheck.log"
  done
  exit 0
fi
timeout 400 python3 .devrun/flash/bench.py "$@" 2>&1 | tee "$out/flash.log"
