//===- SchedulerPool.cpp - Counters of the persistent kernels -------------===//

#include "SchedulerPool.h"

#include "Internal.h"

using namespace cmask::rt;

Status SchedulerPool::grow() {
  CUdevice device;
  CMASK_CU(cuCtxGetDevice(&device));
  DeviceBuffer chunk;
  if (Status s = chunk.allocate(2 * kChunkPairs, device); !s)
    return s;
  CMASK_CU(cuMemsetD32(chunk.get(), 0, 2 * kChunkPairs));
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
  if (!capturing) {
    auto it = perStream.find(stream);
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
  out = chunks.back().get() + 2 * sizeof(int32_t) * usedInLast++;
  if (!capturing)
    perStream.emplace(stream, out);
  return Status::success();
}
