#!/bin/bash
# Issue 26, "the lines of the call path shrink" (helper callshrink): the cuda call path of this
# tree (new) against main's (old), on one H100/H200, under 3 minutes.
#   From the repository root, with main's tree placed at .devrun/callshrink/old/
#   (git archive 4f91041 | tar -x -C .devrun/callshrink/old):
#     bash .devrun/callshrink/run.sh
# 1. the new tree's device tests of the launch path (tests/cuda_runtime: fake-driver and
#    DLPack-reader tests; tests/cuda: the cuda-marked interop, streams, device-array, numpy,
#    dynamic-shared and checks files), JUnit XML + log;
# 2. three rounds, old then new, of benchmarks/cuda.py --only overhead (kdsl vs CuPy RawKernel,
#    torch, Triton) and (rounds 1 and 3) benchmarks/launch_host.py --real-torch (the host cost
#    split; round 1 also prints the generated launchers);
# 3. $OUT/summary.json: per tree and round, every overhead row's kdsl and peer seconds, and the
#    launch_host rows; SELF-CHECK lines at the end (tests passed, the helper and the DLPack
#    reader used by the new tree, torch out= at or below CuPy RawKernel).
set -u
OUT=${OUT:-/tmp/callshrink_out}
mkdir -p "$OUT"
NEW=$PWD
OLD=$PWD/.devrun/callshrink/old
export KDSL_CACHE_DIR=/tmp/callshrink_cache
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda \
    > "$OUT/pip.txt" 2>&1 || echo "pip install failed (see pip.txt)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import torch; print(torch.__version__, hasattr(torch.Tensor, '__dlpack_c_exchange_api__'))" \
    > "$OUT/torch.txt" 2>&1

# 1. tests (new tree), bounded
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/cuda_runtime \
    tests/cuda/test_cuda_interop.py tests/cuda/test_cuda_streams.py \
    tests/cuda/test_cuda_device_array.py tests/cuda/test_cuda_numpy.py \
    tests/cuda/test_cuda_dynamic_shared.py tests/cuda/test_cuda_checks.py \
    --junitxml="$OUT/tests_new.xml" > "$OUT/tests_new.txt" 2>&1
echo "tests rc=$?" >> "$OUT/tests_new.txt"
tail -3 "$OUT/tests_new.txt"

# 2. benchmarks, alternating
trees=(new)
[ -f "$OLD/benchmarks/cuda.py" ] && trees=(old new) || echo "no old tree at $OLD: new only"
for name in "${trees[@]}"; do      # which kdsl each tree's runs import (must be its own)
  t=$([ "$name" = new ] && echo "$NEW" || echo "$OLD")
  (cd "$t" && PYTHONPATH="$t" python3 -c "import kdsl, kdsl_cuda; print(kdsl.__file__, kdsl_cuda.__file__)") \
      > "$OUT/which_${name}.txt" 2>&1
  echo "$name imports: $(cat "$OUT/which_${name}.txt")"
done
for round in 1 2 3; do
  for name in "${trees[@]}"; do
    t=$([ "$name" = new ] && echo "$NEW" || echo "$OLD")
    (cd "$t" && PYTHONPATH="$t" timeout 35 python3 benchmarks/cuda.py --only overhead \
        --json "$OUT/overhead_${name}_${round}.json") > "$OUT/overhead_${name}_${round}.txt" 2>&1
    if [ "$round" != 2 ]; then     # (rounds 1 and 3: the budget; round 1 prints the sources)
      (cd "$t" && PYTHONPATH="$t" timeout 20 python3 benchmarks/launch_host.py --real-torch \
          $([ "$round" = 1 ] && echo --source)) > "$OUT/host_${name}_${round}.txt" 2>&1
    fi
    echo "round $round $name: $(grep -c . "$OUT/overhead_${name}_${round}.txt") overhead lines"
  done
done

# 3. summary and self-checks
python3 - "$OUT" <<'EOF'
import glob, json, os, re, sys
out = sys.argv[1]
summary = {"overhead": {}, "host": {}}
for path in sorted(glob.glob(os.path.join(out, "overhead_*_*.json"))):
    name, rnd = os.path.basename(path)[len("overhead_"):-5].rsplit("_", 1)
    rows = json.load(open(path))["results"]
    summary["overhead"].setdefault(name, {})[rnd] = {
        r["workload"]: {"kdsl_us": None if r.get("kdsl_s") is None else r["kdsl_s"] * 1e6,
                        "peers_us": {p: (None if v.get("s") is None else v["s"] * 1e6)
                                     for p, v in r.get("peers", {}).items()}}
        for r in rows}
for path in sorted(glob.glob(os.path.join(out, "host_*_*.txt"))):
    name, rnd = os.path.basename(path)[len("host_"):-4].rsplit("_", 1)
    rows = {}
    for line in open(path):
        m = re.match(r"^(.*?)\s+([0-9.]+)\s+([0-9.]+)$", line.rstrip())
        if m:
            rows[m.group(1).strip()] = {"min_us": float(m.group(2)), "median_us": float(m.group(3))}
        elif line.startswith("# fast launchers launch through"):
            rows["route"] = line.strip()
    summary["host"].setdefault(name, {})[rnd] = rows
tests = open(os.path.join(out, "tests_new.txt")).read()
summary["tests_new"] = tests.strip().splitlines()[-2:]
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
ok = "rc=0" in tests
print(f"SELF-CHECK tests (new): {'PASS' if ok else 'FAIL'} {summary['tests_new']}")
routes = {n: {r.get('route') for r in rs.values()} for n, rs in summary["host"].items()}
print(f"SELF-CHECK launch route (host rows): {routes}")
src = os.path.join(out, "host_new_1.txt")
reader = os.path.exists(src) and "_rd(" in open(src).read()
print(f"SELF-CHECK new tree reads torch through the DLPack reader: {'PASS' if reader else 'NO'}")
for name, rounds in summary["overhead"].items():
    for rnd, rows in sorted(rounds.items()):
        for title, r in rows.items():
            if "out=" in title:
                print(f"  {name} r{rnd} {title}: kdsl {r['kdsl_us']} us, peers {r['peers_us']}")
for name, rounds in summary["host"].items():
    for rnd, rows in sorted(rounds.items()):
        keep = {k: v["median_us"] for k, v in rows.items() if k != "route" and
                (k.startswith("add(") or "alone" in k or "RawKernel" in k)}
        print(f"  host {name} r{rnd}: {keep}")
EOF
