#!/usr/bin/env bash
# Times the OpenCL decode variant (backends/opencl/ocl_decode.c) over a few
# FATTN_DECODE_TUNE candidates on GQA 32/8, d128, seq_q 1 decode shapes, one
# line per (candidate, shape); the constants in ocl_decode.c come from it.
# Usage (GPU machine, after `source .devkit/env.sh` and a build in ./build):
#   bench/tune_opencl_decode.sh [build dir] [device] [dtype] [candidate...]
#   e.g. bench/tune_opencl_decode.sh build 0 bf16
#        bench/tune_opencl_decode.sh build 0 bf16 "" "waves=8" "nt=256,tile=8192"
# A candidate is a FATTN_DECODE_TUNE value ("" = the built-in defaults); the
# names are listed at the top of backends/opencl/ocl_decode.c. A candidate the
# path declines runs another OpenCL path: compare its ms with the default's.
# FATTN_TUNE_BUDGET (seconds, default 170) stops the sweep when passed.
set -uo pipefail
build=${1:-build}
device=${2:-0}
dtype=${3:-bf16}
shift 3 2>/dev/null || shift $#
if [ $# -gt 0 ]; then
  cands=("$@")
else
  cands=("" "waves=8" "waves=16,min_keys=128" "nt=256" "nt=256,waves=8" "nt=64,waves=8"
         "tile=8192" "tile=8192,waves=8" "min_keys=512,waves=2" "vec=0")
fi
base='hq=32,hkv=8,sq=1,d=128'
shapes=(--shape "b=1,$base,skv=32768" --shape "b=1,$base,skv=131072"
        --shape "b=8,$base,skv=32768" --shape "b=64,$base,skv=32768"
        --shape "b=1,$base,skv=32768,page=16" --shape "b=1,$base,skv=32768,page=256")
budget=${FATTN_TUNE_BUDGET:-170}
SECONDS=0
printf '%-34s %5s %7s %5s %10s %8s %6s %s\n' candidate b skv page ms GB/s hbm% status
for c in "${cands[@]}"; do
  if [ "$SECONDS" -ge "$budget" ]; then
    echo "# budget of ${budget}s spent: skipped \"$c\" and the rest"
    break
  fi
  FATTN_DECODE_TUNE="$c" timeout 120 "$build/fattn_bench" --backend opencl --device "$device" \
    --no-sweep "${shapes[@]}" --dtype "$dtype" --no-naive --iters 20 --check-rows 2 \
    --hbm-gbps 4800 --csv - 2>/dev/null |
    python3 -c '
import csv, sys
cand = sys.argv[1] or "(defaults)"
for r in csv.DictReader(sys.stdin):
    if r.get("backend") != "opencl":
        continue
    print("%-34s %5s %7s %5s %10s %8s %6s %s" % (cand, r["batch"], r["seq_kv"], r["page_size"] or "0",
          r["ms"], r["gbps"], r["bw_pct"], r["status"] if r["status"] == "ok" else r["status"] + ": " + r["note"]))
' "$c"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && echo "# \"$c\": fattn_bench exit status $rc"
done
echo "# ${SECONDS}s"
