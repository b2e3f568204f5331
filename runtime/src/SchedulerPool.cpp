//===- SchedulerPool.cpp - The persistent kernels' counters ---------------===//

#include "SchedulerPool.h"

#include "Internal.h"

using namespace cmask::rt;

Status SchedulerPool::grow() {
  CUdevice device;
  CMASK_CU(cuCtxGetDevice(&device));
  DeviceBuffer chunk;
  if (Status s = chunk.allocate(2 * kChunkPairs, device); !s)
    return s;
  chunks.push_back(std::move(chunk));
  usedInLast = 0;
  return Status::success();
}

Status SchedulerPool::init() {
  std::lock_guard<std::mutex> lock(mutex);
  return chunks.empty() ? grow() : Status::success();
}

Status SchedulerPool::acquire(CUstream stream, CUdeviceptr &out) {
  std::lock_guard<std::mutex> lock(mutex);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CMASK_CU(cuStreamIsCapturing(stream, &capture));
  bool capturing = capture != CU_STREAM_CAPTURE_STATUS_NONE;
  std::pair<CUstream, std::thread::id> key{
      stream, stream == CU_STREAM_PER_THREAD ? std::this_thread::get_id()
                                             : std::thread::id()};
  if (!capturing) {
    auto it = perStream.find(key);
    if (it != perStream.end()) {
      out = it->second;
      return Status::success();
    }
  }
  if (usedInLast == kChunkPairs) {
    if (capturing)
      return Status::error(
          "attention: all " + std::to_string(chunks.size() * kChunkPairs) +
          " scheduler counters are taken and none can be allocated while a "
          "CUDA graph is captured (each captured forward launch keeps one): "
          "capture fewer launches per artifact");
    if (Status s = grow(); !s)
      return s;
  }
  CUdeviceptr pair = chunks.back().get() + 2 * sizeof(int32_t) * usedInLast;
  // Ordered before the stream's (or the graph's) launches.
  CMASK_CU(cuMemsetD32Async(pair, 0, 2, stream));
  ++usedInLast;
  out = pair;
  if (!capturing)
    perStream.emplace(key, out);
  return Status::success();
}
