//===- cmask-preprocess-bench.cpp - Time an artifact's preprocess ---------===//
//
//   cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]
//
// For each batch of the metadata file: uploads it, allocates the descriptor
// once, warms up, then times the whole preprocess (every phase of every tile
// shape of the artifact; unchecked, as on the hot path) with CUDA events, N
// times, and prints one line per batch: `tokens=<total_q>`, then for the
// forward descriptor (rows) `median_us` (GPU time between CUDA events around
// the eager launches), `host_us` (host time of the preprocess call) and
// `graph_us` (GPU time of the same launches captured once in a CUDA graph
// and replayed), then the same with a `train_` prefix for the training
// descriptor (rows and columns) when the artifact has a column direction.
//
//===----------------------------------------------------------------------===//

#include "BatchUpload.h"

#include <algorithm>
#include <chrono>
#include <iostream>

using namespace cmask::rt;

static constexpr const char *kTool = "cmask-preprocess-bench";
#define CHECK CMASK_TOOL_CHECK
#define CHECK_CU CMASK_TOOL_CHECK_CU

static int fail(const std::string &message) { return toolFail(kTool, message); }

namespace {
/// Medians over the timed runs, in microseconds.
struct Times {
  float eager = 0, host = 0, graph = 0;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return fail(
        "usage: cmask-preprocess-bench ARTIFACT_DIR CASES.json [--iters N]");
  int iters = 50;
  if (argc == 5 && std::string(argv[3]) == "--iters")
    iters = std::max(1, std::atoi(argv[4]));
  CHECK(usePrimaryContext(0));
  std::unique_ptr<Artifact> artifact;
  CHECK(Artifact::load(argv[1], 0, artifact));
  std::vector<json::Value> batches;
  CHECK(readBatches(argv[2], batches));
  CUevent start, stop;
  CUstream stream;
  CHECK_CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK_CU(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (const json::Value &json : batches) {
    DeviceBatch batch;
    CHECK(batch.load(json, *artifact));
    auto time = [&](bool columns, Times &out) -> Status {
      Descriptor d;
      if (Status s = artifact->createDescriptor(batch.bounds(columns), d); !s)
        return s;
      auto run = [&] {
        return artifact->preprocess(d, batch.numSeqs, batch.totalQ(),
                                    batch.totalK(), batch.cuQDevice,
                                    batch.cuKDevice, batch.args, stream);
      };
      for (int w = 0; w < 3; ++w)
        if (Status s = run(); !s)
          return s;
      if (cuStreamSynchronize(stream) != CUDA_SUCCESS)
        return Status::error("the preprocess faulted");
      // Eager launches: GPU time between two events (the GPU waits for the
      // host's launches), and the host time of the preprocess call.
      std::vector<float> eager, host, graph;
      for (int it = 0; it < iters; ++it) {
        cuEventRecord(start, stream);
        auto t0 = std::chrono::steady_clock::now();
        if (Status s = run(); !s)
          return s;
        auto t1 = std::chrono::steady_clock::now();
        cuEventRecord(stop, stream);
        if (cuEventSynchronize(stop) != CUDA_SUCCESS)
          return Status::error("the preprocess faulted");
        float ms = 0;
        cuEventElapsedTime(&ms, start, stop);
        eager.push_back(ms * 1000.0f);
        host.push_back(
            std::chrono::duration<float, std::micro>(t1 - t0).count());
      }
      // The same launches captured once in a CUDA graph and replayed: the
      // GPU's own time, without the host's launch overhead.
      CUgraph g;
      CUgraphExec exec;
      if (cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) !=
          CUDA_SUCCESS)
        return Status::error("cuStreamBeginCapture failed");
      Status captured = run();
      if (cuStreamEndCapture(stream, &g) != CUDA_SUCCESS || !captured)
        return Status::error("capturing the preprocess failed");
      if (cuGraphInstantiate(&exec, g, 0) != CUDA_SUCCESS)
        return Status::error("cuGraphInstantiate failed");
      for (int it = 0; it < iters + 3; ++it) {
        cuEventRecord(start, stream);
        cuGraphLaunch(exec, stream);
        cuEventRecord(stop, stream);
        if (cuEventSynchronize(stop) != CUDA_SUCCESS)
          return Status::error("the preprocess graph faulted");
        float ms = 0;
        cuEventElapsedTime(&ms, start, stop);
        if (it >= 3)
          graph.push_back(ms * 1000.0f);
      }
      cuGraphExecDestroy(exec);
      cuGraphDestroy(g);
      out = {median(eager), median(host), median(graph)};
      return Status::success();
    };
    Times fwd;
    CHECK(time(/*columns=*/false, fwd));
    std::cout << "tokens=" << batch.totalQ() << " median_us=" << fwd.eager
              << " host_us=" << fwd.host << " graph_us=" << fwd.graph;
    if (artifact->getColumns()) {
      Times train;
      CHECK(time(/*columns=*/true, train));
      std::cout << " train_median_us=" << train.eager
                << " train_host_us=" << train.host
                << " train_graph_us=" << train.graph;
    }
    std::cout << std::endl;
  }
  cuStreamDestroy(stream);
  cuEventDestroy(start);
  cuEventDestroy(stop);
  return 0;
}
