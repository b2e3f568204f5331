//===- SchedulerPool.h - The persistent kernels' counters -------*- C++ -*-===//
//
// The persistent forward kernel's CTAs claim work items from a pair of int32
// counters (KernelABI.h, forward `scheduler`): zero before a launch, and
// zero again after it (its last CTA resets them). Launches that run at the
// same time need distinct pairs. A stream's launches run one after another,
// so each stream has a pair of its own (the per-thread default stream one
// per thread), zeroed on that stream before its first launch; a launch
// captured into a CUDA graph gets a pair of its own, zeroed by the graph
// (a graph's replays are ordered behind each other; two instances of one
// graph must not run at the same time, and a captured launch's pair is
// never reused: at most kChunkPairs per artifact once every allocated
// chunk is taken). A stream destroyed with launches in flight must not be
// followed by a new stream of the same handle until they finish.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_SCHEDULERPOOL_H
#define CMASK_RUNTIME_SCHEDULERPOOL_H

#include "cmask_runtime/Runtime.h"

#include <cuda.h>

#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace cmask::rt {

class SchedulerPool {
public:
  /// Pairs allocated (and zeroed) at a time.
  static constexpr size_t kChunkPairs = 4096;

  SchedulerPool() = default;
  SchedulerPool(const SchedulerPool &) = delete;
  SchedulerPool &operator=(const SchedulerPool &) = delete;

  /// Allocates the first pairs (in the current context; not zeroed: a pair
  /// is zeroed on its stream when acquire hands it out).
  Status init();
  /// The counters for a launch on `stream` in the current context (the
  /// artifact's). Fails while `stream` captures a graph and every pair
  /// already allocated is taken (allocating is not allowed then).
  Status acquire(CUstream stream, CUdeviceptr &out);

private:
  Status grow();

  std::mutex mutex;
  /// Keyed by the stream and, for the per-thread default stream, the
  /// thread.
  std::map<std::pair<CUstream, std::thread::id>, CUdeviceptr> perStream;
  std::vector<DeviceBuffer> chunks;
  size_t usedInLast = kChunkPairs;
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_SCHEDULERPOOL_H
