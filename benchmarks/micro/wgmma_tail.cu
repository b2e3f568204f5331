// The forward step's tail beside a wgmma: whether its dispatch stalls come
// from the wgmmas around it. fmul_dispatch.cu found that the tail's
// instruction mix alone (64 FMULs of O by one factor, 32 F2FP packs) takes
// no dispatch stalls (docs/performance.md, fortieth session), while in
// main's step the same block, right after the PV wait, takes 18.9K
// dispatch-stall samples. Two warpgroups per SM (the forward's consumers),
// each round per warpgroup:
//   after     4 wgmma m64n128k16 into acc, wait, then the tail on acc (the
//             registers the wgmmas just wrote: main's O after the PV wait)
//   apart     the same wgmmas and wait, the tail on registers no wgmma writes
//   inflight  the wgmmas issued, the tail on other registers while they run,
//             then the wait (main's tail under the next step's S)
//   none      the tail alone
//   after-rs  after, the wgmmas' A operand from registers (as the PV
//             wgmma's P) instead of shared memory
//   after-mixed, none-mixed
//             after and none with an ex2 (MUFU) before each pack: the
//             peers' mix of the tail with the exponentials
// The operands are zeros in shared memory (no swizzle): the timing, not the
// values, is measured. The tail is timed by clock64 around it; each mode
// prints the tail's cycles per round per warp. Built and run on the GPU
// machine:
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_tail benchmarks/micro/wgmma_tail.cu
//   /tmp/wgmma_tail [MODE]
//   ncu -k regex:kern --metrics 'regex:smsp__average_warps_issue_stalled_(dispatch_stall|wait)_per_issue_active\.ratio' /tmp/wgmma_tail MODE
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>

constexpr int ITERS = 2048;
enum Mode { After, Apart, Inflight, None };

#define F8(a, i)                                                               \
  "+f"(a[i]), "+f"(a[i + 1]), "+f"(a[i + 2]), "+f"(a[i + 3]), "+f"(a[i + 4]), \
      "+f"(a[i + 5]), "+f"(a[i + 6]), "+f"(a[i + 7])
#define F64(a)                                                                 \
  F8(a, 0), F8(a, 8), F8(a, 16), F8(a, 24), F8(a, 32), F8(a, 40), F8(a, 48),   \
      F8(a, 56)

/// A shared-memory matrix descriptor without swizzle (start, leading and
/// stride byte offsets, each in 16-byte units).
__device__ uint64_t descriptor(const void *smem) {
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return ((address & 0x3FFFF) >> 4) | (uint64_t(128 >> 4) << 16) |
         (uint64_t(256 >> 4) << 32);
}

/// The instruction up to its accumulators (operands %0-%63), with p (scale-d)
/// set: acc is added to.
#define WGMMA_HEAD                                                             \
  "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                   \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "    \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "     \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "     \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "     \
  "%58, %59, %60, %61, %62, %63}, "

/// acc += A * B, m64n128k16, both operands from shared memory.
__device__ void wgmmaSS(float (&acc)[64], uint64_t a, uint64_t b) {
  asm volatile(WGMMA_HEAD "%64, %65, p, 1, 1, 0, 0;\n}\n"
               : F64(acc)
               : "l"(a), "l"(b));
}

/// acc += A * B, m64n128k16, A from registers (4 bf16x2 a thread).
__device__ void wgmmaRS(float (&acc)[64], const unsigned (&a)[4], uint64_t b) {
  asm volatile(WGMMA_HEAD "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : F64(acc)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

/// The tail: 64 FMULs by c, each pair packed to bf16x2 and XORed into p
/// (MIXED: an ex2 of the first of the pair before its pack).
template <bool MIXED>
__device__ void tail(float (&o)[64], float c, unsigned (&p)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    o[2 * i] *= c;
    o[2 * i + 1] *= c;
    float x = o[2 * i];
    if (MIXED)
      asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(x) : "f"(o[2 * i]));
    __nv_bfloat162 h = __floats2bfloat162_rn(x, o[2 * i + 1]);
    p[i] ^= *reinterpret_cast<unsigned *>(&h);
  }
}

template <int MODE, bool RS = false, bool MIXED = false>
__global__ void __launch_bounds__(256, 1)
    kern(const float *in, float *out, long long *cycles) {
  extern __shared__ __align__(128) unsigned char smem[];
  for (int i = threadIdx.x; i < 48 * 1024 / 4; i += blockDim.x)
    reinterpret_cast<unsigned *>(smem)[i] = 0;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  int wg = threadIdx.x / 128;
  uint64_t a = descriptor(smem + wg * 8192), b = descriptor(smem + 16384);
  float acc[64], o[64];
  float c = in[threadIdx.x & 31];
  for (int i = 0; i < 64; ++i) {
    acc[i] = 0;
    o[i] = in[(threadIdx.x + i) & 255];
  }
  unsigned p[32], aRegs[4] = {0, 0, 0, 0};
  for (int i = 0; i < 32; ++i)
    p[i] = 0;
  long long spent = 0;
#pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
    if (MODE != None) {
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (RS)
          wgmmaRS(acc, aRegs, b + 2 * k);
        else
          wgmmaSS(acc, a + 2 * k, b + 2 * k);
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      if (MODE != Inflight)
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    long long t0 = clock64();
    if (MODE == After)
      tail<MIXED>(acc, c, p);
    else
      tail<MIXED>(o, c, p);
    long long t1 = clock64();
    spent += t1 - t0;
    if (MODE == Inflight)
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    c = c * 0.9999f + 1e-7f;
  }
  float sum = 0;
  for (int i = 0; i < 64; ++i)
    sum += acc[i] + o[i];
  for (int i = 0; i < 32; ++i)
    sum += __uint_as_float(p[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if ((threadIdx.x & 31) == 0)
    cycles[blockIdx.x * 8 + threadIdx.x / 32] = spent;
}

int main(int argc, char **argv) {
  const char *names[] = {"after",    "apart",       "inflight",  "none",
                         "after-rs", "after-mixed", "none-mixed"};
  int only = argc > 1 ? atoi(argv[1]) : -1; // one mode (for ncu), else all
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float *in, *out;
  long long *cyc;
  cudaMalloc(&in, 256 * 4);
  cudaMemset(in, 0, 256 * 4);
  cudaMalloc(&out, sms * 256 * 4);
  cudaMalloc(&cyc, sms * 8 * 8);
  void (*kernels[])(const float *, float *, long long *) = {
      kern<After>,       kern<Apart>,
      kern<Inflight>,    kern<None>,
      kern<After, true>, kern<After, false, true>,
      kern<None, false, true>};
  printf("mode         tail cycles/round/warp\n");
  for (int mode = 0; mode < 7; ++mode) {
    if (only >= 0 && mode != only)
      continue;
    cudaFuncSetAttribute(kernels[mode],
                         cudaFuncAttributeMaxDynamicSharedMemorySize, 49152);
    for (int rep = 0; rep < 2; ++rep)
      kernels[mode]<<<sms, 256, 49152>>>(in, out, cyc);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      printf("launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    long long h[8];
    cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
    double sum = 0;
    for (long long x : h)
      sum += x;
    printf("%-12s %8.1f\n", names[mode], sum / 8 / ITERS);
  }
  return 0;
}
