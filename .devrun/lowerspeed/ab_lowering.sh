#!/bin/bash
# Lowering speed, before (main 578f04b, from build/lowerspeed/main_tree.tar.gz, made by
# `git archive 578f04b` plus this branch's benchmarks/lowering.py) and after (this checkout),
# alternated on one quiet machine.  Usage: bash .devrun/lowerspeed/ab_lowering.sh [rounds]
set -u
ROUNDS=${1:-3}
OUT=${OUT:-/tmp/ab_out}; mkdir -p "$OUT"
MAIN=/tmp/lowerspeed_main; rm -rf "$MAIN"; mkdir -p "$MAIN"
tar -xzf build/lowerspeed/main_tree.tar.gz -C "$MAIN"
unset PYTHONDONTWRITEBYTECODE
python3 -c "import sys, numpy; print(sys.version.split()[0], 'numpy', numpy.__version__)" || exit 1
python3 -c "import llvmlite; print('llvmlite', llvmlite.__version__)" || echo "no llvmlite: cuda only"
BES=cuda,cpu; python3 -c "import llvmlite" 2>/dev/null || BES=cuda
nproc; uptime
for r in $(seq "$ROUNDS"); do
  for side in main new; do
    root=$PWD; [ "$side" = main ] && root=$MAIN
    (cd "$root" && python3 benchmarks/lowering.py --corpus "$OUT/code_$side" --reps 5 \
        --only softmax,matmul,conv3 --backends $BES) > "$OUT/named_${side}_$r.txt" 2>&1
  done
done
for side in main new; do
  root=$PWD; [ "$side" = main ] && root=$MAIN
  (cd "$root" && python3 benchmarks/lowering.py --corpus "$OUT/corpus_$side" --reps 3 --backends $BES) \
      > "$OUT/corpus_${side}.txt" 2>&1
done
tail -n 3 "$OUT"/corpus_*.txt
for f in "$OUT"/named_*_1.txt; do echo "== $f"; cat "$f"; done
diff -r "$OUT/corpus_main" "$OUT/corpus_new" > "$OUT/corpus_diff.txt"; echo "corpus diff lines: $(wc -l < "$OUT/corpus_diff.txt")"
