//===- cmask-preprocess-bench.cpp - Time an artifact's preprocess ---------===//
//
//   cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]
//
// For each batch of the metadata file: uploads it, allocates the descriptor
// once, warms up, then times the whole preprocess (every phase of every tile
// shape of the artifact; unchecked, as on the hot path) with CUDA events, N
// times, and prints one line `tokens=<total_q> median_us=<..> min_us=<..>`.
//
//===----------------------------------------------------------------------===//

#include "BatchUpload.h"

#include <algorithm>
#include <iostream>

using namespace cmask::rt;

static constexpr const char *kTool = "cmask-preprocess-bench";
#define CHECK CMASK_TOOL_CHECK
#define CHECK_CU CMASK_TOOL_CHECK_CU

static int fail(const std::string &message) { return toolFail(kTool, message); }

int main(int argc, char **argv) {
  if (argc < 3)
    return fail("usage: cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]");
  int iters = 50;
  if (argc == 5 && std::string(argv[3]) == "--iters")
    iters = std::max(1, std::atoi(argv[4]));
  CHECK(usePrimaryContext(0));
  std::unique_ptr<Artifact> artifact;
  CHECK(Artifact::load(argv[1], 0, artifact));
  std::vector<json::Value> batches;
  CHECK(readBatches(argv[2], batches));
  CUevent start, stop;
  CHECK_CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK_CU(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  for (const json::Value &json : batches) {
    DeviceBatch batch;
    CHECK(batch.load(json, *artifact));
    Descriptor d;
    CHECK(artifact->createDescriptor({batch.numSeqs, batch.totalQ(), batch.maxK}, d));
    auto run = [&] {
      return artifact->preprocess(d, batch.numSeqs, batch.totalQ(), batch.cuQDevice,
                                  batch.cuKDevice, batch.args, nullptr);
    };
    for (int w = 0; w < 3; ++w)
      CHECK(run());
    CHECK_CU(cuCtxSynchronize());
    std::vector<float> times;
    for (int it = 0; it < iters; ++it) {
      CHECK_CU(cuEventRecord(start, nullptr));
      CHECK(run());
      CHECK_CU(cuEventRecord(stop, nullptr));
      CHECK_CU(cuEventSynchronize(stop));
      float ms = 0;
      CHECK_CU(cuEventElapsedTime(&ms, start, stop));
      times.push_back(ms * 1000.0f);
    }
    std::sort(times.begin(), times.end());
    std::cout << "tokens=" << batch.totalQ() << " median_us=" << times[times.size() / 2]
              << " min_us=" << times.front() << std::endl;
  }
  cuEventDestroy(start);
  cuEventDestroy(stop);
  return 0;
}
