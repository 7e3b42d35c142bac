#!/usr/bin/env bash
# The GPU checks a session runs before it resolves a GPU issue, in few device calls
# (tests/cuda/README.md says what each step checks).  Usage, from the repository root on
# the GPU machine:  bash tests/cuda/device_check.sh STEP [OUT_DIR]
#   suite      the GPU suite + the fuzzer's cuda slice, then memcheck on the GPU suite
#   racecheck  racecheck on the kernels with shared memory, barriers, shuffles and scans
#   campaign   the GPU-schedule fuzz campaign (CASES, SEED, JOBS from the environment)
# Each step writes its log to OUT_DIR (default: .) and ends with the tool's exit status.
set -uo pipefail
step=${1:?suite, racecheck or campaign}
out=${2:-.}
export PYTHONUNBUFFERED=1 KDSL_CACHE_DIR=${KDSL_CACHE_DIR:-/tmp/kdsl-gpu-cache}
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda >/dev/null 2>&1
case $step in
suite)
    python3 -m pytest -q -rs -n 8 -m cuda tests/cuda tests/fuzz/test_fuzz_slice_cuda.py \
        > "$out/gpu_suite.txt" 2>&1; rc=$?
    echo "gpu suite rc=$rc: $(tail -1 "$out/gpu_suite.txt")"
    KDSL_TEST_SANITIZER=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${MEMCHECK_S:-400}" \
        compute-sanitizer --tool memcheck --error-exitcode 1 --target-processes all \
        python3 -m pytest -q -n 8 -m cuda -k "not jax" tests/cuda > "$out/memcheck.txt" 2>&1
    m=$?; echo "memcheck rc=$m: $(grep -E 'ERROR SUMMARY|passed|failed' "$out/memcheck.txt" | sort | uniq -c | tail -4)"
    exit $((rc || m)) ;;
racecheck)
    KDSL_TEST_SANITIZER=1 timeout "${RACECHECK_S:-540}" compute-sanitizer --tool racecheck \
        --error-exitcode 1 --target-processes all python3 -m pytest -q -n "${JOBS:-12}" -m cuda \
        tests/cuda/test_cuda_core.py tests/cuda/test_cuda_issue24_25.py tests/cuda/test_cuda_scan.py \
        tests/cuda/test_cuda_fori.py -k "${RACE_K:-gpu_schedules or seed000 or race or tuple or scan or fori}" \
        > "$out/racecheck.txt" 2>&1; rc=$?
    echo "racecheck rc=$rc: $(grep -E 'RACECHECK SUMMARY|passed|failed' "$out/racecheck.txt" | sort | uniq -c | tail -4)"
    exit $rc ;;
campaign)
    timeout "${CAMPAIGN_S:-540}" python3 -m tests.fuzz --gpu-schedules --seed "${SEED:-102}" \
        --cases "${CASES:-20000}" --jobs "${JOBS:-16}" --no-recheck --out "$out/campaign.jsonl" \
        > "$out/campaign.txt" 2>&1; rc=$?
    grep -v '^\.\.\.' "$out/campaign.txt" | tail -25
    exit $rc ;;
esac
