#!/bin/bash
# Old (main at 1c00547, placed at .devrun/b_old) against new (this tree) cuda launch costs,
# alternated (order flipped each round): benchmarks/launch_host.py --real-torch (host rows) and
# benchmarks/cuda.py --only overhead (device rows).  Prints the rows; writes one log to $OUT.
set -u
NEW=$PWD; OLD=$PWD/.devrun/b_old; LOG=${OUT:-/tmp}/ab_overhead.log
export KDSL_CACHE_DIR=/tmp/ab_cache
for round in 1 2; do
  order="old new"; [ $round = 2 ] && order="new old"
  for name in $order; do
    t=$([ $name = new ] && echo $NEW || echo $OLD)
    echo "== round $round $name host" >> $LOG
    (cd $t && PYTHONPATH=$t timeout 25 python3 benchmarks/launch_host.py --real-torch) >> $LOG 2>&1
    echo "== round $round $name device" >> $LOG
    (cd $t && PYTHONPATH=$t timeout 35 python3 benchmarks/cuda.py --only overhead) >> $LOG 2>&1
  done
done
grep -E "^== |^add\(|alone|RawKernel|launch cost" $LOG | grep -v "^$" | cut -c1-150
