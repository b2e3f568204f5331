// The forward step's tail in isolation: whether its dispatch stalls come from
// the instruction mix (docs/performance.md, thirty-ninth session: main's
// block of O's rescale and P's packing after the PV wait holds 18.9K dispatch
// stall samples, the peers' mix of the same with the exponentials 8.6-10.6K).
// Each thread runs ITERS rounds of one of three blocks:
//   fmul   64 independent FMULs of O by one factor (O's rescale)
//   tail   the 64 FMULs, each pair packed to bf16x2 (32 F2FP) and XORed into
//          an accumulator (32 LOP3): main's tail after the PV wait
//   mixed  the same with an ex2 (32 MUFU) before each pack: the peers' mix
// with W warps per SM sub-partition (blockDim = 128 * W, one block per SM;
// the forward's consumers are 2 warps per sub-partition). It prints cycles
// per round per warp (clock64) and the block's instructions per cycle per
// sub-partition. Built and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o /tmp/fmul_dispatch benchmarks/micro/fmul_dispatch.cu
//   /tmp/fmul_dispatch [MODE [W]]
//   ncu -k regex:kern --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
//       /tmp/fmul_dispatch MODE 2
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>
#include <cstring>

constexpr int ITERS = 4096;

template <int MODE>
__global__ void kern(const float *in, float *out, long long *cycles) {
  float o[64];
  float c = in[threadIdx.x & 31];
  for (int i = 0; i < 64; ++i) {
    o[i] = in[(threadIdx.x + i) & 255];
  }
  unsigned p[32];
  for (int i = 0; i < 32; ++i) p[i] = 0;
  __syncthreads();
  long long t0 = clock64();
#pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
    if (MODE == 0) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] *= c;
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[2 * i] *= c;
        o[2 * i + 1] *= c;
        float a = o[2 * i];
        if (MODE == 2)
          asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(a) : "f"(o[2 * i]));
        __nv_bfloat162 h = __floats2bfloat162_rn(a, o[2 * i + 1]);
        p[i] ^= *reinterpret_cast<unsigned *>(&h);
      }
    }
    c = c * 0.9999f + 1e-7f;
  }
  long long t1 = clock64();
  float acc = 0;
  for (int i = 0; i < 64; ++i) acc += o[i];
  for (int i = 0; i < 32; ++i) acc += __uint_as_float(p[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if ((threadIdx.x & 31) == 0) cycles[blockIdx.x * 32 + threadIdx.x / 32] = t1 - t0;
}

int main(int argc, char **argv) {
  const char *names[] = {"fmul", "tail", "mixed"};
  int only = argc > 1 ? atoi(argv[1]) : -1;  // one mode (for ncu), else all
  int onlyW = argc > 2 ? atoi(argv[2]) : -1; // one warps-per-SMSP count, else 1-3
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float *in, *out;
  long long *cyc;
  cudaMalloc(&in, 256 * 4);
  cudaMemset(in, 0, 256 * 4);
  cudaMalloc(&out, sms * 1024 * 4);
  cudaMalloc(&cyc, sms * 32 * 8);
  // instructions per round per thread (the block's own; the loop's 2-3 more)
  int per[] = {64, 32 * 4, 32 * 5};
  printf("mode   warps/SMSP  cycles/round/warp  SMSP issue of the block (instr/cycle)\n");
  for (int mode = 0; mode < 3; ++mode) {
    if (only >= 0 && mode != only) continue;
    for (int w = 1; w <= 3; ++w) {
      if (onlyW > 0 && w != onlyW) continue;
      dim3 grid(sms), block(128 * w);
      for (int rep = 0; rep < 2; ++rep) {
        switch (mode) {
        case 0: kern<0><<<grid, block>>>(in, out, cyc); break;
        case 1: kern<1><<<grid, block>>>(in, out, cyc); break;
        default: kern<2><<<grid, block>>>(in, out, cyc); break;
        }
      }
      if (cudaDeviceSynchronize() != cudaSuccess) { printf("launch failed\n"); return 1; }
      long long h[32 * 3];
      cudaMemcpy(h, cyc, 4 * w * 8, cudaMemcpyDeviceToHost);
      double sum = 0;
      for (int i = 0; i < 4 * w; ++i) sum += h[i];
      double perRound = sum / (4 * w) / ITERS;
      printf("%-6s %d           %8.1f           %.2f\n", names[mode], w, perRound,
             per[mode] * w / perRound);
    }
  }
  return 0;
}
