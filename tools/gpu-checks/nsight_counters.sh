#!/usr/bin/env bash
# --nsight: ncu --profile-from-start off profiles a `%%profile --nsight` cell and must capture
# exactly the cell's kernels (counted against the same cell under torch's profiler), none of
# its warm-up. --counters: the Block's hardware counters per kernel (or the one line why not).
set -uo pipefail
# gpu-check.sh gives this script 180 s in all: the three runs' limits add up to less.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
probe=tools/nsight_counters_probe.py
status=0
expected=$(timeout 40 python3 "$probe" count | tee "$OUT/nsight-count.txt" | sed -n 's/^KERNELS=//p')
echo "kernels of the cell's profiled iterations under torch's profiler: ${expected:-?}"
if command -v ncu >/dev/null; then
  timeout 90 ncu --profile-from-start off --csv --metrics gpu__time_duration.sum \
    python3 "$probe" nsight > "$OUT/ncu-nsight.csv" 2> "$OUT/ncu-nsight.err"
  grep -E "CAPTURE=|==PROF==|==ERROR==" "$OUT/ncu-nsight.csv" "$OUT/ncu-nsight.err" | head -n 20
  captured=$(grep -c '"gpu__time_duration.sum"' "$OUT/ncu-nsight.csv")
  echo "kernels ncu captured between cudaProfilerStart/Stop: $captured"
  if [ -n "$expected" ] && [ "$captured" = "$expected" ]; then
    echo "NSIGHT CAPTURE OK: $captured kernels, exactly the cell's"
  else
    echo "NSIGHT CAPTURE MISMATCH: ncu $captured, the cell ${expected:-?}"; status=1
  fi
else
  echo "no ncu: the Nsight capture was not checked"; status=1
fi
timeout 45 python3 "$probe" counters 2>&1 | tail -n 40 | tee "$OUT/counters-block.txt"
grep -q "COUNTER_ROWS=" "$OUT/counters-block.txt" || status=1
exit $status
