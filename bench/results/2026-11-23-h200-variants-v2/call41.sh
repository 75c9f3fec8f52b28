#!/usr/bin/env bash
# Session 2026-11-23c, call 8: experiment: what the bias family's 32-key tile costs at d128. Builds HEAD (bias BM128/BN32), a copy with the plain d128 shape at BN32 (plain cost of the shape), and a copy with the bias family at BM64/BN64 (MT=1).
set -u
source .devkit/env.sh
R=$OUT; O=/tmp/o41; rm -rf $O; mkdir -p $O
fin() { tar czf $R/out.tgz -C $O .; }
trap fin EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/machine.txt; date -u >> $O/machine.txt
rm -rf /tmp/p32 /tmp/b64 && cp -r .wtc /tmp/p32 && cp -r .wtc /tmp/b64
sed -i 's/template <> struct Sm80Shape<128> : ShapeOf<128, 64, 4, false, false, 2> {};/template <> struct Sm80Shape<128> : ShapeOf<128, 32, 4, false, false, 2> {};/' /tmp/p32/kernels_cu/flash_mma.cuh
sed -i 's/template <> struct Sm80BiasShape<128> : ShapeOf<128, 32, 4, false, false, 2> {};/template <> struct Sm80BiasShape<128> : ShapeOf<64, 64, 4, false, false, 2> {};/' /tmp/b64/kernels_cu/flash_mma.cuh
grep -h "struct Sm80Shape<128>\|struct Sm80BiasShape<128>" /tmp/p32/kernels_cu/flash_mma.cuh /tmp/b64/kernels_cu/flash_mma.cuh > $O/shapes.txt
for d in /tmp/p32 /tmp/b64 .wtc; do
  (cd $d && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF > $O/build_$(basename $d).log 2>&1 && cmake --build build -j 5 --target fattn_bench fattn_cuda test_variants >> $O/build_$(basename $d).log 2>&1 || tail -20 $O/build_$(basename $d).log) &
done
wait
sh="--shape 1x32x8192x128c --shape 1x32x32768x128c"
for r in 1 2; do for t in wtc p32 b64; do
  d=/tmp/$t; [ $t = wtc ] && d=.wtc
  for v in none bias; do
    timeout 90 $d/build/fattn_bench --backend cuda --device 0 --no-sweep $sh --dtype bf16 --no-naive --iters 10 --check-rows 0 $([ $v = none ] || echo --variant $v) > $O/var_${t}_${v}_$r.txt 2>&1; echo "var $t $v $r rc $?" >> $O/summary.txt
  done
done; done
timeout 200 env FATTN_TEST_BACKENDS=cuda FATTN_TEST_REQUIRE=cuda,cuda-variants /tmp/b64/build/test_variants > $O/b64_variants.log 2>&1; echo "b64 variants rc $?" >> $O/summary.txt
cat $O/summary.txt | grep -v "rc 0"; cat $O/shapes.txt; grep -h "runs passed" $O/b64_variants.log
for t in wtc p32 b64; do for v in none bias; do echo "$t $v: $(grep -hE '^\[' $O/var_${t}_${v}_*.txt | awk '{print $(NF-5)}' | tr '\n' ' ')"; done; done
