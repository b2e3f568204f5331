//===- BatchUpload.h - Metadata batches to device buffers -------*- C++ -*-===//
//
// Shared by the runtime's tools: error reporting, and reading one batch of a
// metadata file (docs/metadata-json.md; not validated: the tools also feed
// invalid metadata to the kernels on purpose) into device buffers and
// MetadataArgs in the artifact's order.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_TOOLS_BATCHUPLOAD_H
#define CMASK_RUNTIME_TOOLS_BATCHUPLOAD_H

#include "cmask_runtime/Json.h"
#include "cmask_runtime/Runtime.h"

#include <fstream>
#include <iostream>
#include <list>
#include <sstream>

namespace cmask::rt {

/// Prints "TOOL: message" and returns the tools' failure exit code.
inline int toolFail(const char *tool, const std::string &message) {
  std::cerr << tool << ": " << message << "\n";
  return 1;
}

/// In a tool's main(), with `kTool` naming the tool: return 1 with the
/// message of a failed Status / CUDA call.
#define CMASK_TOOL_CHECK(expr)                                                 \
  do {                                                                         \
    ::cmask::rt::Status st_ = (expr);                                          \
    if (!st_)                                                                  \
      return ::cmask::rt::toolFail(kTool, st_.message);                        \
  } while (0)
#define CMASK_TOOL_CHECK_CU(expr)                                              \
  do {                                                                         \
    if ((expr) != CUDA_SUCCESS)                                                \
      return ::cmask::rt::toolFail(kTool, #expr " failed");                    \
  } while (0)

/// Makes device `device`'s primary context current on this thread, as an
/// application using the runtime (PyTorch, for one) has it: the tools then
/// call the driver API directly for uploads, events and synchronization.
inline Status usePrimaryContext(int device) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return Status::error("cannot make device " + std::to_string(device) +
                         "'s primary context current");
  return Status::success();
}

/// The batches of a metadata file (one object or an array of them).
inline Status readBatches(const std::string &path,
                          std::vector<json::Value> &out) {
  std::ifstream in(path);
  if (!in)
    return Status::error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  json::Value doc;
  std::string error;
  if (!json::parse(ss.str(), doc, error))
    return Status::error(path + ": " + error);
  out = doc.isArray() ? doc.array : std::vector<json::Value>{doc};
  return Status::success();
}

/// One batch on the device.
struct DeviceBatch {
  std::vector<int32_t> cuQ = {0}, cuK = {0};
  int64_t maxQ = 0, maxK = 0;
  /// Pass one cu_seqlens buffer for q and k when they are equal (as
  /// self-attention does; the runtime then mirrors a symmetric spec's rows
  /// into its columns).
  bool shareCuSeqlens = true;
  int32_t numSeqs = 0;
  CUdeviceptr cuQDevice = 0, cuKDevice = 0;
  std::vector<MetadataArg> args;
  std::list<DeviceBuffer> buffers;

  int64_t totalQ() const { return cuQ.back(); }
  int64_t totalK() const { return cuK.back(); }
  /// The bounds of exactly this batch; with `columns`, the column
  /// direction's too (when the artifact has one).
  Bounds bounds(bool columns) const {
    return {numSeqs, totalQ(), maxK, columns, totalK(), maxQ};
  }

  Status upload(const std::vector<int32_t> &host, CUdeviceptr &out) {
    buffers.emplace_back();
    DeviceBuffer &b = buffers.back();
    if (Status s = b.allocate(host.size()); !s)
      return s;
    if (!host.empty() &&
        cuMemcpyHtoD(b.get(), host.data(), host.size() * sizeof(int32_t)) !=
            CUDA_SUCCESS)
      return Status::error("cuMemcpyHtoD failed");
    out = b.get();
    return Status::success();
  }

  Status load(const json::Value &batch, const Artifact &artifact) {
    const json::Value *seqs = batch.get("sequences");
    const json::Value *meta = batch.get("metadata");
    if (!seqs || !seqs->isArray())
      return Status::error("a batch without \"sequences\"");
    for (const json::Value &s : seqs->array) {
      const json::Value *q = s.get("q_len"), *k = s.get("k_len");
      if (!q || !k)
        return Status::error("a sequence without q_len/k_len");
      cuQ.push_back(static_cast<int32_t>(cuQ.back() + q->integer));
      cuK.push_back(static_cast<int32_t>(cuK.back() + k->integer));
      maxQ = std::max<int64_t>(maxQ, q->integer);
      maxK = std::max<int64_t>(maxK, k->integer);
    }
    numSeqs = static_cast<int32_t>(seqs->array.size());
    if (Status s = upload(cuQ, cuQDevice); !s)
      return s;
    if (shareCuSeqlens && cuQ == cuK)
      cuKDevice = cuQDevice; // self-attention: one buffer for both
    else if (Status s = upload(cuK, cuKDevice); !s)
      return s;
    for (const auto &[name, role] : artifact.getMetadata()) {
      const json::Value *v = meta ? meta->get(name) : nullptr;
      if (!v)
        return Status::error("missing metadata " + name);
      MetadataArg a;
      std::vector<int32_t> values, starts = {0};
      if (role == MetadataRole::Scalar) {
        a.scalar = static_cast<int32_t>(v->integer);
      } else if (role == MetadataRole::PerSequence) {
        for (const json::Value &x : v->array)
          values.push_back(static_cast<int32_t>(x.integer));
      } else {
        for (const json::Value &list : v->array) {
          for (const json::Value &x : list.array)
            values.push_back(static_cast<int32_t>(x.integer));
          starts.push_back(static_cast<int32_t>(values.size()));
        }
      }
      if (role != MetadataRole::Scalar) {
        a.numValues = values.size();
        if (Status s = upload(values, a.values); !s)
          return s;
      }
      if (role == MetadataRole::Offsets)
        if (Status s = upload(starts, a.starts); !s)
          return s;
      args.push_back(a);
    }
    return Status::success();
  }
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_TOOLS_BATCHUPLOAD_H
