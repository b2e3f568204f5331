//===- SchedulerPool.h - Counters of the persistent kernels ------*- C++
//-*-===//
//
// The forward kernel runs a persistent grid whose CTAs claim work items from
// a pair of int32 counters (KernelABI.h, forward `scheduler`): zero before a
// launch, and zero again after it (its last CTA resets them). Launches that
// run at the same time need distinct pairs. A stream's launches run one
// after another, so each stream has a pair of its own; a launch captured
// into a CUDA graph gets a pair of its own (a graph's replays are ordered
// behind each other).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_SCHEDULERPOOL_H
#define CMASK_RUNTIME_SCHEDULERPOOL_H

#include "cmask_runtime/Runtime.h"

#include <cuda.h>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace cmask::rt {

class SchedulerPool {
public:
  /// Pairs allocated (and zeroed) at a time.
  static constexpr size_t kChunkPairs = 4096;

  SchedulerPool() = default;
  SchedulerPool(const SchedulerPool &) = delete;
  SchedulerPool &operator=(const SchedulerPool &) = delete;

  /// Allocates the first pairs (in the current context).
  Status init();
  /// The counters for a launch on `stream` in the current context (the
  /// artifact's). Fails while `stream` captures a graph and every pair
  /// already allocated is taken (allocating is not allowed then).
  Status acquire(CUstream stream, CUdeviceptr &out);

private:
  Status grow();

  std::mutex mutex;
  std::unordered_map<CUstream, CUdeviceptr> perStream;
  std::vector<DeviceBuffer> chunks;
  size_t usedInLast = kChunkPairs;
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_SCHEDULERPOOL_H
