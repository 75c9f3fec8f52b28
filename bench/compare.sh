#!/usr/bin/env bash
# The cross-vendor comparison in one command: fattn_bench over every available
# backend and device, the PyTorch SDPA peers where PyTorch sees an NVIDIA GPU,
# then one side-by-side table (and PNG charts where matplotlib is installed).
# FATTN_COMMIT names the commit in machine.txt where the checkout has no history.
# Usage: bench/compare.sh [--quick] [--long] [--out DIR] [--build DIR] [-- fattn_bench options]
#   --quick  the short sweep (seconds on a laptop CPU); default: the papers' sweep
#   --long   also the long-sequence demonstration (seq 131072, causal) on each GPU
#
# Failures. A failing fattn_bench run (the sweep; with --long, the demonstration)
# fails the script with exit status 1, naming the step; the table is still made
# from what was measured when there is any. Bad fattn_bench options, or a sweep
# that measured nothing, stop it at once. compare.py failing fails it too.
# Optional steps, whose failure is said on stderr and does not fail the script:
#   - machine.txt's details (date, commit, nvidia-smi, uname): best effort;
#   - the PyTorch peers: only where PyTorch sees a CUDA GPU; without them the
#     table has fattn's columns only;
#   - the charts: compare.py leaves them out, saying so, where matplotlib is missing.
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
failed=()
# Optional: machine.txt is best effort (nvidia-smi may be missing or fail).
{ date -u; echo "commit ${FATTN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}";
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  uname -srm; } > "$out/machine.txt" 2>&1 || true

rc=0
"$build/fattn_bench" $quick --json "$out/fattn.jsonl" --csv "$out/fattn.csv" ${extra[@]+"${extra[@]}"} | tee "$out/fattn_table.txt" || rc=$?
if [ "$rc" = 2 ]; then
  echo "compare.sh: step 'fattn_bench sweep' failed: fattn_bench refused its options (exit 2; see its message above)" >&2
  exit 1
elif [ "$rc" != 0 ]; then
  if ! grep -q '^{' "$out/fattn.jsonl" 2>/dev/null; then
    echo "compare.sh: step 'fattn_bench sweep' failed (exit $rc) and measured nothing; see its messages above" >&2
    exit 1
  fi
  failed+=("fattn_bench sweep (exit $rc; the failing cells are 'error' in $out/fattn_table.txt and $out/fattn.csv)")
fi
if [ "$long" = 1 ]; then
  rc=0
  "$build/fattn_bench" --long --json "$out/long.jsonl" --csv "$out/long.csv" 2>&1 | tee "$out/long.txt" || rc=$?
  [ "$rc" = 0 ] || failed+=("fattn_bench --long (exit $rc; see $out/long.txt)")
fi
peers=""
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "compare.sh: PyTorch peers on $(python3 -c 'import torch; print(torch.cuda.get_device_name())')" >&2
  # Optional: a failure is said here and the table goes on without the peers.
  rc=0
  # The peers time the same sweep: --decode passes through.
  decode=""
  for a in ${extra[@]+"${extra[@]}"}; do [ "$a" = --decode ] && decode=--decode; done
  python3 bench/peers_torch.py $quick $decode > "$out/peers.jsonl" || rc=$?
  if [ "$rc" = 0 ]; then
    peers="$out/peers.jsonl"
  else
    echo "compare.sh: optional step 'PyTorch peers' failed (exit $rc): the table has no peers" >&2
  fi
else
  echo "compare.sh: no PyTorch with a CUDA GPU here: no peers" >&2
fi
# Charts need matplotlib: Debian's python3-matplotlib lives in /usr/bin/python3,
# which may not be the python3 first on PATH.
py=python3
python3 -c "import matplotlib" 2>/dev/null || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
rc=0
"$py" bench/compare.py "$out/fattn.jsonl" ${peers:+"$peers"} --out "$out" || rc=$?
[ "$rc" = 0 ] || failed+=("compare.py (exit $rc)")
if [ ${#failed[@]} -gt 0 ]; then
  for f in "${failed[@]}"; do echo "compare.sh: step failed: $f" >&2; done
  exit 1
fi
