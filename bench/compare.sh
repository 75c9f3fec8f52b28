#!/usr/bin/env bash
# The cross-vendor comparison in one command: fattn_bench over every available
# backend and device, the PyTorch SDPA peers where PyTorch sees an NVIDIA GPU,
# then one side-by-side table (and PNG charts where matplotlib is installed).
# FATTN_COMMIT names the commit in machine.txt where the checkout has no history.
# Usage: bench/compare.sh [--quick] [--long] [--out DIR] [--build DIR] [-- fattn_bench options]
#   --quick  the short sweep (seconds on a laptop CPU); default: the papers' sweep
#   --long   also the long-sequence demonstration (seq 131072, causal) on each GPU
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-out build=build quick="" long=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick ;;
    --long) long=1 ;;
    --out) out=$2; shift ;;
    --build) build=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: bench/compare.sh [--quick] [--long] [--out DIR] [--build DIR] [-- fattn_bench options]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$build/fattn_bench" ] || { echo "compare.sh: build first ($build/fattn_bench is missing)" >&2; exit 1; }
mkdir -p "$out"
{ date -u; echo "commit ${FATTN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}";
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  uname -srm; } > "$out/machine.txt" 2>&1 || true
"$build/fattn_bench" $quick --json "$out/fattn.jsonl" --csv "$out/fattn.csv" "${extra[@]}" | tee "$out/fattn_table.txt" || true
if [ "$long" = 1 ]; then
  "$build/fattn_bench" --long --json "$out/long.jsonl" --csv "$out/long.csv" 2>&1 | tee "$out/long.txt" || true
fi
peers=""
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "compare.sh: PyTorch peers on $(python3 -c 'import torch; print(torch.cuda.get_device_name())')" >&2
  python3 bench/peers_torch.py $quick > "$out/peers.jsonl" && peers="$out/peers.jsonl"
else
  echo "compare.sh: no PyTorch with a CUDA GPU here: no peers" >&2
fi
# Charts need matplotlib: Debian's python3-matplotlib lives in /usr/bin/python3,
# which may not be the python3 first on PATH.
py=python3
python3 -c "import matplotlib" 2>/dev/null || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
"$py" bench/compare.py "$out/fattn.jsonl" $peers --out "$out"
