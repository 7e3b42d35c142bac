#!/bin/bash
# session 21 final (1-GPU H200 machine, 16-core host): GPU suite, conv27's device script,
# warm start, old-vs-new launch cost, Dask compute-bound scaling on 16 cores.  -> $OUT/all.tgz
set -u
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
R=$OUT/r; mkdir -p $R/conv27 $R/mm16
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc; grep -m1 "model name" /proc/cpuinfo; } | tee $R/host.txt
export PYTHONUNBUFFERED=1
PARTS=${PARTS:-suite,conv27,warm,ab,mm16}
if [[ $PARTS == *suite* ]]; then
KDSL_CACHE_DIR=/tmp/kc_suite timeout ${SUITE_S:-230} python3 -m pytest -q -rs -n 8 -m cuda tests/cuda tests/cuda_codegen \
   tests/cuda_schedules tests/cuda_runtime tests/cuda_attention tests/fuzz/test_fuzz_slice_cuda.py > $R/gpu_suite.txt 2>&1
echo "gpu suite rc=$?: $(tail -1 $R/gpu_suite.txt)"; grep -E "^(FAILED|ERROR)" $R/gpu_suite.txt | head -20
fi
if [[ $PARTS == *conv27* ]] && [ -f .devrun/conv27/run.sh ]; then
  OUT=$R/conv27 timeout ${CONV_S:-300} bash .devrun/conv27/run.sh > $R/conv27/log.txt 2>&1; echo "conv27 rc=$?"; tail -40 $R/conv27/log.txt
fi
if [[ $PARTS == *warm* ]]; then
  (unset PYTHONDONTWRITEBYTECODE; timeout 120 python3 benchmarks/warm_start.py --runs 5 2>&1 | tail -18)
  cp benchmarks/results/warm_start*.json $R/ 2>/dev/null
fi
if [[ $PARTS == *ab* ]] && [ -d .devrun/b_old ]; then
  OUT=$R timeout 150 bash .devrun/ab_overhead.sh
fi
if [[ $PARTS == *race* ]]; then
  [ -f /tmp/conv27_memcheck.py ] || sed -n '/^cat > \/tmp\/conv27_memcheck.py/,/^PY$/p' .devrun/conv27/run.sh | sed '1d;$d' > /tmp/conv27_memcheck.py
  KDSL_CACHE_DIR=/tmp/kc_race timeout 60 python3 /tmp/conv27_memcheck.py 2>&1 | tail -2
  KDSL_CACHE_DIR=/tmp/kc_race timeout 150 compute-sanitizer --tool racecheck python3 /tmp/conv27_memcheck.py > $R/conv_racecheck.txt 2>&1
  echo "conv racecheck rc=$?"; tail -5 $R/conv_racecheck.txt
fi
if [[ $PARTS == *mm16* ]]; then
  OUT=$R/mm16 timeout 330 bash .devrun/dask/mm16.sh 2>&1 | tail -30
fi
tar czf $OUT/all.tgz -C $R . && rm -rf $R
