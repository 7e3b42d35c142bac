#!/bin/bash
# Lowering speed before (BASE, default main 578f04b) and after (NEW, default h/lowerspeed),
# alternated on one quiet machine; each tree from `git archive`, both timed with NEW's
# benchmarks/lowering.py.  From any checkout of the repository (branches present):
#   git show h/lowerspeed:.devrun/lowerspeed/ab_lowering.sh > /tmp/ab.sh && bash /tmp/ab.sh [rounds]
set -u
ROUNDS=${1:-3}
BASE=${BASE:-578f04b}; NEW=${NEW:-h/lowerspeed}
OUT=${OUT:-/tmp/ab_out}; mkdir -p "$OUT"
T=/tmp/lowerspeed_ab; rm -rf "$T"; mkdir -p "$T/main" "$T/new"
git archive "$BASE" | tar -x -C "$T/main"
git archive "$NEW" | tar -x -C "$T/new"
cp "$T/new/benchmarks/lowering.py" "$T/main/benchmarks/lowering.py"
unset PYTHONDONTWRITEBYTECODE
python3 -c "import sys, numpy; print(sys.version.split()[0], 'numpy', numpy.__version__)" || exit 1
BES=cuda,cpu; python3 -c "import llvmlite" 2>/dev/null || BES=cuda
echo "backends $BES; $(nproc) cores; $(uptime)"
for r in $(seq "$ROUNDS"); do
  for side in main new; do
    (cd "$T/$side" && python3 benchmarks/lowering.py --corpus "$OUT/code_$side" --reps 5 \
        --only softmax,matmul,conv3 --backends $BES) > "$OUT/named_${side}_$r.txt" 2>&1
  done
done
for side in main new; do
  (cd "$T/$side" && python3 benchmarks/lowering.py --corpus "$OUT/corpus_$side" --reps 3 --backends $BES) \
      > "$OUT/corpus_${side}.txt" 2>&1
done
for f in "$OUT"/named_*.txt "$OUT"/corpus_*.txt; do echo "== $f"; cat "$f"; done
diff -r "$OUT/corpus_main" "$OUT/corpus_new" > "$OUT/corpus_diff.txt"
echo "corpus code diff lines (main's conv3/cummax order varies between processes): $(wc -l < "$OUT/corpus_diff.txt")"
