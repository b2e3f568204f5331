//===- cmask-preprocess-bench.cpp - Time an artifact's preprocess ---------===//
//
//   cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]
//
// For each batch of the metadata file: uploads it, allocates the descriptor
// once, warms up, then times the whole preprocess (every phase of every tile
// shape of the artifact; unchecked, as on the hot path) with CUDA events, N
// times, and prints one line `tokens=<total_q> median_us=<..> min_us=<..>`
// for the forward descriptor (rows), followed by `train_median_us=<..>
// train_min_us=<..>` for the training descriptor (rows and columns) when the
// artifact has a column direction.
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
    // Median and minimum over `iters` timed runs, in microseconds.
    auto time = [&](bool columns, float &median, float &least) -> Status {
      Descriptor d;
      if (Status s = artifact->createDescriptor(batch.bounds(columns), d); !s)
        return s;
      auto run = [&] {
        return artifact->preprocess(d, batch.numSeqs, batch.totalQ(),
                                    batch.totalK(), batch.cuQDevice,
                                    batch.cuKDevice, batch.args, nullptr);
      };
      for (int w = 0; w < 3; ++w)
        if (Status s = run(); !s)
          return s;
      if (cuCtxSynchronize() != CUDA_SUCCESS)
        return Status::error("the preprocess faulted");
      std::vector<float> times;
      for (int it = 0; it < iters; ++it) {
        cuEventRecord(start, nullptr);
        if (Status s = run(); !s)
          return s;
        cuEventRecord(stop, nullptr);
        if (cuEventSynchronize(stop) != CUDA_SUCCESS)
          return Status::error("the preprocess faulted");
        float ms = 0;
        cuEventElapsedTime(&ms, start, stop);
        times.push_back(ms * 1000.0f);
      }
      std::sort(times.begin(), times.end());
      median = times[times.size() / 2];
      least = times.front();
      return Status::success();
    };
    float median = 0, least = 0;
    CHECK(time(/*columns=*/false, median, least));
    std::cout << "tokens=" << batch.totalQ() << " median_us=" << median
              << " min_us=" << least;
    if (artifact->getColumns()) {
      CHECK(time(/*columns=*/true, median, least));
      std::cout << " train_median_us=" << median << " train_min_us=" << least;
    }
    std::cout << std::endl;
  }
  cuEventDestroy(start);
  cuEventDestroy(stop);
  return 0;
}
