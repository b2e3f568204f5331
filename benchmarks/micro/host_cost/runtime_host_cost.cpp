//===- runtime_host_cost.cpp - The runtime's host time per call -----------===//
//
//   runtime_host_cost ARTIFACT_DIR [--n N] [--batch B] [--heads H] [--calls C]
//
// Host time of the C API's calls on the hot path of a training layer: one
// cmask_attention_forward and one cmask_attention_backward on a prepared
// descriptor (B sequences of N tokens, H heads, D = 128, bf16; the artifact's
// mask must take no metadata, e.g. causal), each timed C times with
// steady_clock, medians and means printed in us, plus cmask_preprocess's (the
// training descriptor: rows and columns). Run under the stand-in libcuda
// (cuda_stub.c; runtime_host_cost.sh builds both) it times the runtime's C++
// alone: every driver call returns at once and nothing is launched; the
// launches each call made are counted (a call that made none is an error).
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/cmask_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <cuda.h>

// The stand-in libcuda's launch count (cuda_stub.c).
extern "C" unsigned long cuda_stub_launches(void);

namespace {
[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "runtime_host_cost: %s\n", what.c_str());
  std::exit(1);
}

void check(cmask_status s, const char *what) {
  if (s != CMASK_OK)
    fail(std::string(what) + ": " + cmask_last_error());
}

uint64_t alloc(size_t bytes) {
  CUdeviceptr p = 0;
  if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS)
    fail("cuMemAlloc");
  return p;
}

cmask_tensor tensor(int64_t tokens, int64_t heads) {
  cmask_tensor t{};
  t.data = alloc(size_t(tokens) * heads * 128 * 2);
  t.dtype = CMASK_BF16;
  t.tokens = tokens;
  t.heads = heads;
  t.head_dim = 128;
  t.token_stride = heads * 128;
  t.head_stride = 128;
  return t;
}

template <typename F> void report(const char *name, int calls, F call) {
  std::vector<double> us(calls);
  unsigned long launched = cuda_stub_launches();
  for (int i = 0; i < calls; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    call();
    auto t1 = std::chrono::steady_clock::now();
    us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  double launches = double(cuda_stub_launches() - launched) / calls;
  if (launches < 1)
    fail(std::string(name) + " launched nothing (the batch is empty?)");
  double mean = std::accumulate(us.begin(), us.end(), 0.0) / calls;
  std::sort(us.begin(), us.end());
  std::printf("| %s | %.3f | %.3f | %.3f | %g |\n", name, us[calls / 2], mean,
              us[calls * 9 / 10], launches);
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    fail("usage: runtime_host_cost ARTIFACT_DIR [--n N] [--batch B] "
         "[--heads H] [--calls C]");
  int64_t n = 1024, batch = 1, heads = 32;
  int calls = 20000;
  if (argc % 2 != 0)
    fail(std::string("option ") + argv[argc - 1] + " has no value");
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (v < 1)
      fail(flag + " takes a positive integer, not '" + argv[i + 1] + "'");
    if (flag == "--n")
      n = v;
    else if (flag == "--batch")
      batch = v;
    else if (flag == "--heads")
      heads = v;
    else if (flag == "--calls")
      calls = static_cast<int>(v);
    else
      fail("unknown option " + flag);
  }
  cmask_artifact *artifact = nullptr;
  check(cmask_artifact_load(argv[1], 0, &artifact), "cmask_artifact_load");
  if (cmask_artifact_num_metadata(artifact) != 0)
    fail("the artifact's mask takes metadata; give one that takes none");
  int64_t total = n * batch;
  cmask_bounds bounds{};
  bounds.num_seqs = static_cast<int32_t>(batch);
  bounds.total_q = total;
  bounds.max_seqlen_k = n;
  bounds.columns = 1;
  bounds.total_k = total;
  bounds.max_seqlen_q = n;
  cmask_descriptor *descriptor = nullptr;
  check(cmask_descriptor_create(artifact, &bounds, &descriptor),
        "cmask_descriptor_create");
  uint64_t cuSeqlens = alloc(sizeof(int32_t) * (batch + 1));
  auto preprocess = [&] {
    check(cmask_preprocess(artifact, descriptor, static_cast<int32_t>(batch),
                           total, total, cuSeqlens, cuSeqlens, nullptr, 0,
                           nullptr, 0),
          "cmask_preprocess");
  };
  preprocess();
  cmask_attention_args f{};
  f.q = tensor(total, heads);
  f.k = tensor(total, heads);
  f.v = tensor(total, heads);
  f.out = tensor(total, heads);
  f.lse = alloc(sizeof(float) * total * heads);
  f.tile_shape = -1;
  cmask_backward_args b{};
  b.q = f.q, b.k = f.k, b.v = f.v, b.out = f.out;
  b.dout = tensor(total, heads);
  b.dq = tensor(total, heads);
  b.dk = tensor(total, heads);
  b.dv = tensor(total, heads);
  b.lse = f.lse;
  b.scratch = alloc(cmask_backward_scratch_bytes(total, batch, heads, 128));
  b.max_seqlen_q = n;
  std::printf("%lld x %lld tokens, %lld heads, D 128, bf16, %d calls each; "
              "host us per call:\n\n| call | median | mean | p90 | launches |\n"
              "|---|---|---|---|---|\n",
              static_cast<long long>(batch), static_cast<long long>(n),
              static_cast<long long>(heads), calls);
  report("cmask_attention_forward", calls, [&] {
    check(cmask_attention_forward(artifact, descriptor, &f, nullptr),
          "cmask_attention_forward");
  });
  report("cmask_attention_backward", calls, [&] {
    check(cmask_attention_backward(artifact, descriptor, &b, nullptr),
          "cmask_attention_backward");
  });
  report("cmask_preprocess (rows and columns)", calls, preprocess);
  cmask_descriptor_destroy(descriptor);
  cmask_artifact_destroy(artifact);
  return 0;
}
