//===- cmask-preprocess-bench.cpp - Time an artifact's preprocess ---------===//
//
//   cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]
//
// For each batch of the metadata file: uploads it, allocates the descriptor
// once, warms up, then times the whole preprocess (every phase of every tile
// shape of the artifact) with CUDA events, N times, and prints one line
// `tokens=<total_q> median_us=<..> min_us=<..>` per batch.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/Json.h"
#include "cmask_runtime/Runtime.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace cmask::rt;

static int fail(const std::string &message) {
  std::cerr << "cmask-preprocess-bench: " << message << "\n";
  return 1;
}

#define CHECK(expr)                                                            \
  do {                                                                         \
    Status st_ = (expr);                                                       \
    if (!st_)                                                                  \
      return fail(st_.message);                                                \
  } while (0)
#define CHECK_CU(expr)                                                         \
  do {                                                                         \
    if ((expr) != CUDA_SUCCESS)                                                \
      return fail(#expr " failed");                                            \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 3)
    return fail("usage: cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]");
  int iters = 50;
  if (argc == 5 && std::string(argv[3]) == "--iters")
    iters = std::max(1, std::atoi(argv[4]));
  std::unique_ptr<Artifact> artifact;
  CHECK(Artifact::load(argv[1], 0, artifact));
  std::ifstream in(argv[2]);
  std::stringstream ss;
  ss << in.rdbuf();
  json::Value doc;
  std::string error;
  if (!json::parse(ss.str(), doc, error))
    return fail(error);
  for (const json::Value &batch : doc.array) {
    std::vector<int32_t> cuQ = {0}, cuK = {0};
    int64_t maxK = 0;
    for (const json::Value &s : batch.get("sequences")->array) {
      cuQ.push_back(static_cast<int32_t>(cuQ.back() + s.get("q_len")->integer));
      cuK.push_back(static_cast<int32_t>(cuK.back() + s.get("k_len")->integer));
      maxK = std::max<int64_t>(maxK, s.get("k_len")->integer);
    }
    int32_t numSeqs = static_cast<int32_t>(cuQ.size() - 1);
    std::vector<DeviceBuffer> keep;
    auto upload = [&](const std::vector<int32_t> &host, CUdeviceptr &out) {
      keep.emplace_back();
      if (Status s = keep.back().allocate(host.size()); !s)
        return s;
      if (!host.empty() &&
          cuMemcpyHtoD(keep.back().get(), host.data(), host.size() * 4) != CUDA_SUCCESS)
        return Status::error("cuMemcpyHtoD failed");
      out = keep.back().get();
      return Status::success();
    };
    keep.reserve(16);
    CUdeviceptr dq, dk;
    CHECK(upload(cuQ, dq));
    CHECK(upload(cuK, dk));
    std::vector<MetadataArg> args;
    const json::Value *meta = batch.get("metadata");
    for (const auto &[name, role] : artifact->getMetadata()) {
      const json::Value *v = meta->get(name);
      if (!v)
        return fail("missing metadata " + name);
      MetadataArg a;
      if (role == MetadataRole::Scalar) {
        a.scalar = static_cast<int32_t>(v->integer);
      } else if (role == MetadataRole::PerSequence) {
        std::vector<int32_t> values;
        for (const json::Value &x : v->array)
          values.push_back(static_cast<int32_t>(x.integer));
        a.numValues = values.size();
        CHECK(upload(values, a.values));
      } else {
        std::vector<int32_t> values, starts = {0};
        for (const json::Value &list : v->array) {
          for (const json::Value &x : list.array)
            values.push_back(static_cast<int32_t>(x.integer));
          starts.push_back(static_cast<int32_t>(values.size()));
        }
        a.numValues = values.size();
        CHECK(upload(values, a.values));
        CHECK(upload(starts, a.starts));
      }
      args.push_back(a);
    }
    Descriptor d;
    CHECK(artifact->createDescriptor({numSeqs, cuQ.back(), maxK}, d));
    for (int w = 0; w < 3; ++w)
      CHECK(artifact->preprocess(d, numSeqs, cuQ.back(), dq, dk, args, nullptr));
    CHECK_CU(cuCtxSynchronize());
    CUevent start, stop;
    CHECK_CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_CU(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    std::vector<float> times;
    for (int it = 0; it < iters; ++it) {
      CHECK_CU(cuEventRecord(start, nullptr));
      CHECK(artifact->preprocess(d, numSeqs, cuQ.back(), dq, dk, args, nullptr));
      CHECK_CU(cuEventRecord(stop, nullptr));
      CHECK_CU(cuEventSynchronize(stop));
      float ms = 0;
      CHECK_CU(cuEventElapsedTime(&ms, start, stop));
      times.push_back(ms * 1000.0f);
    }
    std::sort(times.begin(), times.end());
    std::cout << "tokens=" << cuQ.back() << " median_us=" << times[times.size() / 2]
              << " min_us=" << times.front() << std::endl;
    cuEventDestroy(start);
    cuEventDestroy(stop);
  }
  return 0;
}
