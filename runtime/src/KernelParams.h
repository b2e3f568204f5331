//===- KernelParams.h - The parameters of one kernel launch -----*- C++ -*-===//
//
// Internal to the runtime: a launch's parameters, set by argument (the
// index in the kernel's list of cmask_runtime/KernelABI.h, e.g.
// abi::forward::Out) with the argument's kind checked, and laid out as the
// kernel's parameter space lays them out (each at its kind's alignment and
// size), so that cuLaunchKernel takes them as one buffer.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_SRC_KERNELPARAMS_H
#define CMASK_RUNTIME_SRC_KERNELPARAMS_H

#include "cmask_runtime/KernelABI.h"

#include "Internal.h"

#include <cstring>

namespace cmask::rt {

/// How a kernel is launched: in stream order, or as a programmatic
/// dependent of the kernel launched before it (CUDA's programmatic
/// dependent launch: its CTAs may start before that grid completes; the
/// kernel waits for it, griddepcontrol.wait, before reading what it wrote).
enum class Launch { Plain, Programmatic };

class KernelParams {
public:
  /// The arguments of a list built from the artifact, which outlives the
  /// launch (its names are read for the errors only).
  explicit KernelParams(const std::vector<abi::NamedArg> &list) : named(&list) {
    for (const abi::NamedArg &arg : list)
      kinds.push_back(arg.kind);
    layOut();
  }
  KernelParams(std::vector<abi::NamedArg> &&) = delete; // would dangle
  /// The arguments of a fixed signature (no strings made: a launch's host
  /// time matters, docs/performance.md).
  explicit KernelParams(const abi::Signature &signature)
      : signature(&signature) {
    for (int k = 0; k < signature.size; ++k)
      kinds.push_back(signature.args[k].kind);
    layOut();
  }

  void pointer(int i, CUdeviceptr p) {
    uint64_t v = p;
    put(i, abi::ArgKind::Pointer, &v);
  }
  void tensorMap(int i, const CUtensorMap &map) {
    static_assert(sizeof(CUtensorMap) == abi::sizeOf(abi::ArgKind::TensorMap),
                  "a tensor map is 128 bytes");
    put(i, abi::ArgKind::TensorMap, &map);
  }
  void i32(int i, int32_t v) { put(i, abi::ArgKind::I32, &v); }
  void i64(int i, int64_t v) { put(i, abi::ArgKind::I64, &v); }
  void f32(int i, float v) { put(i, abi::ArgKind::F32, &v); }
  void index(int i, int64_t v) { put(i, abi::ArgKind::Index, &v); }
  /// An int32 buffer of `elements` as MLIR's memref descriptor.
  void buffer(int i, CUdeviceptr p, size_t elements) {
    abi::BufferDescriptor d{p, p, 0, elements, 1};
    put(i, abi::ArgKind::Buffer, &d);
  }

  /// Launches `fn` on `blocks` x `threads` with these parameters; refuses
  /// (an internal error) when an argument was not set or was set with
  /// another kind. `packed`: the parameters go to the driver as one buffer
  /// in the layout above (cheaper for kernels with hundreds of parameters,
  /// the preprocess's stage kernels; plain launches only); otherwise as one
  /// pointer per parameter, the driver taking offsets from the kernel's
  /// image. `how`: Launch above.
  Status launch(CUfunction fn, unsigned blocks, unsigned threads,
                unsigned sharedBytes, CUstream stream,
                Launch how = Launch::Plain, bool packed = false) {
    if (error.empty())
      for (size_t k = 0; k < kinds.size(); ++k)
        if (!set[k])
          error = "argument " + std::to_string(k) + " '" + name(k) +
                  "' was not set";
    if (packed && how == Launch::Programmatic)
      error = "a packed launch is a plain one";
    if (!error.empty())
      return Status::error("internal error: launch parameters: " + error);
    if (packed) {
      size_t size = bytes.size();
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, bytes.data(),
                       CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
      CMASK_CU(cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, sharedBytes,
                              stream, nullptr, extra));
      return Status::success();
    }
    std::vector<void *> pointers;
    pointers.reserve(offsets.size());
    for (size_t offset : offsets)
      pointers.push_back(bytes.data() + offset);
    if (how == Launch::Programmatic) {
      CUlaunchAttribute attribute{};
      attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attribute.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = blocks;
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = threads;
      config.blockDimY = config.blockDimZ = 1;
      config.sharedMemBytes = sharedBytes;
      config.hStream = stream;
      config.attrs = &attribute;
      config.numAttrs = 1;
      CMASK_CU(cuLaunchKernelEx(&config, fn, pointers.data(), nullptr));
      return Status::success();
    }
    CMASK_CU(cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, sharedBytes,
                            stream, pointers.data(), nullptr));
    return Status::success();
  }

private:
  void layOut() {
    offsets.resize(kinds.size());
    set.assign(kinds.size(), false);
    size_t end = 0;
    for (size_t k = 0; k < kinds.size(); ++k) {
      size_t align = abi::alignOf(kinds[k]);
      offsets[k] = (end + align - 1) / align * align;
      end = offsets[k] + abi::sizeOf(kinds[k]);
    }
    bytes.assign(end, 0);
  }
  std::string name(size_t k) const {
    return signature ? signature->args[k].name : (*named)[k].name;
  }
  void put(int i, abi::ArgKind kind, const void *value) {
    if (i < 0 || static_cast<size_t>(i) >= kinds.size()) {
      error = "argument " + std::to_string(i) + " out of range";
      return;
    }
    if (kinds[i] != kind) {
      error = "argument " + std::to_string(i) + " '" + name(i) + "' is " +
              abi::stringify(kinds[i]) + ", set as " + abi::stringify(kind);
      return;
    }
    std::memcpy(bytes.data() + offsets[i], value, abi::sizeOf(kind));
    set[i] = true;
  }

  const abi::Signature *signature = nullptr;
  const std::vector<abi::NamedArg> *named = nullptr;
  std::vector<abi::ArgKind> kinds;
  std::vector<size_t> offsets;
  std::vector<bool> set;
  std::vector<unsigned char> bytes;
  std::string error;
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_SRC_KERNELPARAMS_H
