#!/usr/bin/env bash
# Session 2026-11-23j, call 79: where the paged decode's extra time goes. ncu on fattn_bench,
# bf16 GQA 32/8 d128 seq_q 1: b1 32k dense, pages of 16 and 256; b1 d64 32k dense and page 16
# (the decode kernel and the combine, a few launches each, kernel time and memory metrics).
set -u
source .devkit/env.sh
O=/tmp/o79; rm -rf $O; mkdir -p $O
fin() { tar czf $OUT/out.tgz -C $O .; }
trap fin EXIT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $O/machine.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 > $O/build.log 2>&1 &&
  cmake --build build -j16 >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
m=$m,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,launch__grid_size,launch__registers_per_thread
m=$m,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_active.avg
m=$m,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_barrier
m=$m,lts__t_requests_srcunit_tex.sum,dram__sectors_read.sum
i=0
for s in b=1,hq=32,hkv=8,sq=1,d=128,skv=32768 b=1,hq=32,hkv=8,sq=1,d=128,skv=32768,page=16 \
         b=1,hq=32,hkv=8,sq=1,d=128,skv=32768,page=256 b=1,hq=32,hkv=8,sq=1,d=64,skv=32768 \
         b=1,hq=32,hkv=8,sq=1,d=64,skv=32768,page=16; do
  i=$((i+1))
  echo "$s" > $O/ncu_$i.shape
  timeout 100 ncu --csv --metrics $m -k "regex:decode|combine" --launch-skip 6 --launch-count 4 \
    ./build/fattn_bench --backend cuda --device 0 --no-sweep --dtype bf16 --no-naive --iters 3 --budget 5 \
    --shape $s > $O/ncu_$i.csv 2> $O/ncu_$i.err
  echo "ncu_$i rc $? $s" >> $O/summary.txt
done
cat $O/summary.txt
