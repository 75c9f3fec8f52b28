#!/usr/bin/env bash
# Issue 18 on nvidia-h200-x2: build with NCCL, test_cp, cp_bench --check
# (every rank against one GPU), then the causal bf16 d128 scaling at 128k and
# 512k (zigzag and contiguous), the link's copy rate and topology.
source .devkit/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o102; mkdir -p $O
trap 'tar czf $OUT/out.tgz -C /tmp o102' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $O/gpus.txt 2>&1
nvidia-smi topo -m > $O/topo.txt 2>&1
ND=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null)
echo "nccl dir: $ND" | tee $O/nccl.txt; ls $ND/include $ND/lib >> $O/nccl.txt 2>&1
ls /usr/local/cuda/include/nccl.h >> $O/nccl.txt 2>&1
INC=""; [ -f "$ND/include/nccl.h" ] && INC="-DFATTN_NCCL_INCLUDE_DIR=$ND/include"
export LD_LIBRARY_PATH=$ND/lib:$LD_LIBRARY_PATH
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFATTN_CUDA_ARCHS=90 -DFATTN_BUILD_EXAMPLES=OFF $INC > $O/cmake.txt 2>&1
cmake --build build -j32 > $O/build.txt 2>&1 || { tail -40 $O/build.txt; exit 1; }
grep -i "nccl" $O/cmake.txt
./build/test_cp > $O/test_cp.txt 2>&1; echo "test_cp rc $?"; tail -3 $O/test_cp.txt
timeout 200 ./build/cp_bench --check > $O/check.csv 2> $O/check.err; echo "check rc $?"; cat $O/check.csv; tail -5 $O/check.err
timeout 250 ./build/cp_bench --seqs 131072,524288 --iters 3 --layouts zigzag,contiguous > $O/scale.csv 2> $O/scale.err; echo "scale rc $?"; cat $O/scale.csv; tail -5 $O/scale.err
python3 - > $O/p2p.txt 2>&1 <<'PY'
import torch, time
a = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:0'); b = torch.empty_like(a, device='cuda:1')
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(0); torch.cuda.synchronize(1)
t = time.perf_counter()
for _ in range(10): b.copy_(a)
torch.cuda.synchronize(0); torch.cuda.synchronize(1)
dt = (time.perf_counter() - t) / 10
print(f"cuda:0 -> cuda:1 copy of 1 GiB: {dt*1e3:.2f} ms, {(1<<30)/dt/1e9:.1f} GB/s; peer access {torch.cuda.can_device_access_peer(0,1)}")
PY
cat $O/p2p.txt
