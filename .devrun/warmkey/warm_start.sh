#!/bin/bash
# Warm start, before/after on one machine (issue 26 item 4; helper warmkey).
#   bash .devrun/warmkey/warm_start.sh            (from the repository root, GPU host)
# Runs benchmarks/warm_start.py (cpu and cuda, 7 fresh processes each) on this tree and,
# where git can give it, on the base commit (BASE, default: the merge-base with main),
# alternating so that both see the same machine.  JSON and tables go to $OUT (or /tmp).
set -u
OUT=${OUT:-/tmp/warmkey_out}
mkdir -p "$OUT"
BASE=${BASE:-$(git merge-base HEAD main 2>/dev/null || echo 578f04b)}
trees=("$PWD")
if git rev-parse --git-dir >/dev/null 2>&1 && git worktree add -f /tmp/warmkey_base "$BASE" >/dev/null 2>&1; then
  trees=(/tmp/warmkey_base "$PWD")
else
  echo "no git here: measuring this tree only (run the script on main too)"
fi
python3 -c "import kdsl_cuda" 2>/dev/null || echo "kdsl_cuda not importable (pip install ./kdsl_cuda)"
for round in 1 2; do
  for t in "${trees[@]}"; do
    name=$([ "$t" = "$PWD" ] && echo new || echo base)
    echo "=== $name round $round ($t)"
    (cd "$t" && env -u PYTHONDONTWRITEBYTECODE python3 benchmarks/warm_start.py --runs 7 \
        --backends cpu,cuda --json "$OUT/warm_${name}_$round.json") 2>&1 | tee "$OUT/warm_${name}_$round.txt"
  done
done
