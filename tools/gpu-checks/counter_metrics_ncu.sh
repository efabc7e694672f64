#!/usr/bin/env bash
# Are --counters' metric names valid on this GPU? Nsight Compute reads the same metric names
# as CUPTI's range profiler (both through PerfWorks), and one name the GPU lacks makes the
# range profiler give no counters at all. ncu reads kernelmagic's LIVE_METRICS on two kernels
# (a matmul and an add); where it cannot, it reads CORE_METRICS (what --counters falls back
# to) and names the metrics that failed. Prints METRICS OK / METRICS CORE ONLY / METRICS FAILED.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ! command -v ncu >/dev/null; then
  echo "no ncu: the metric names were not checked"; exit 1
fi
metrics() {
  python3 -c "from kernelmagic.core import counter_metrics as m; print(','.join(m.$1))"
}
live=$(metrics LIVE_METRICS) && core=$(metrics CORE_METRICS) || exit 1
workload='import torch
a = torch.randn(2048, 2048, device="cuda")
b = a @ a
c = a + a
torch.cuda.synchronize()'
read_metrics() {  # $1: comma-separated metrics, $2: a name for the output files
  timeout 70 ncu --csv --clock-control none --launch-count 2 --metrics "$1" \
    python3 -c "$workload" > "$OUT/ncu-metrics-$2.csv" 2> "$OUT/ncu-metrics-$2.err"
  grep -E "==ERROR==|==WARNING==" "$OUT/ncu-metrics-$2.csv" "$OUT/ncu-metrics-$2.err" | head -n 10
  # One CSV row per kernel and metric: "...","Metric Name","Metric Unit","Metric Value"
  grep -o '"[a-z_]*__[a-z_.]*","[^"]*","[^"]*"$' "$OUT/ncu-metrics-$2.csv" | head -n 30
  local found
  found=$(grep -c '"dram__bytes_read.sum"' "$OUT/ncu-metrics-$2.csv")
  [ "$found" -ge 2 ]
}
if read_metrics "$live" live; then
  echo "METRICS OK: ncu read all of --counters' metrics on $(nvidia-smi -L 2>/dev/null | head -n 1)"
elif read_metrics "$core" core; then
  echo "METRICS CORE ONLY: ncu read the FLOP and DRAM metrics, but not with these too:"
  for m in ${live//,/ }; do
    case ",$core," in *",$m,"*) ;; *) echo "  $m";; esac
  done
  exit 1
else
  echo "METRICS FAILED: ncu read none of the counters (permission? see the errors above)"
  exit 1
fi
