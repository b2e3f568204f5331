//===- Runtime.h - Load a cmask artifact and run its preprocess -*- C++ -*-===//
//
// A C++17 library over the CUDA driver API, with no MLIR or LLVM
// dependency: it loads an artifact written by `cmask-translate
// --cmask-to-artifact` (the cubin, or the PTX as a fallback, and
// manifest.json), allocates reusable descriptor buffers from host-known
// bounds and launches the preprocess phases on the caller's stream, without
// synchronizing with the host (docs/descriptor.md, docs/artifact.md).
//
// The C API for bindings is cmask_runtime/cmask_runtime.h. Checked on the
// H200 by scripts/gpu/check_preprocess.sh (descriptors bit for bit against
// the CPU twin, invalid metadata, memcheck, the C API, CUDA-graph capture).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_RUNTIME_H
#define CMASK_RUNTIME_RUNTIME_H

#include "cmask_runtime/KernelABI.h"
#include "cmask_runtime/ManifestABI.h"
#include "cmask_runtime/Schedule.h"

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cmask::rt {

namespace json {
struct Value;
} // namespace json

/// The outcome of a runtime call: ok, or a message that names the CUDA
/// error (e.g. "cuModuleLoadData: CUDA_ERROR_INVALID_PTX") or the bad input.
struct Status {
  bool ok = true;
  std::string message;
  static Status success() { return {}; }
  static Status error(std::string message) {
    return {false, std::move(message)};
  }
  explicit operator bool() const { return ok; }
};

/// How a metadata input is passed (as the kernels take it: KernelABI.h).
using MetadataRole = abi::MetadataRole;

/// One metadata input, in the manifest's order. Device buffers are int32.
struct MetadataArg {
  int32_t scalar = 0;     ///< Scalar
  CUdeviceptr values = 0; ///< PerSequence [B]; Offsets: all boundaries
  size_t numValues = 0;   ///< elements of `values`
  CUdeviceptr starts = 0; ///< Offsets: per-sequence starts [B + 1]
};

/// Makes the primary context of a device current for a scope and restores
/// the caller's context after (cuCtxPushCurrent / cuCtxPopCurrent), so the
/// runtime never changes which device a PyTorch thread is on.
class ScopedContext {
public:
  explicit ScopedContext(CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;

private:
  bool pushed = false;
};

/// A device int32 buffer: owned by the runtime (allocate: RAII, holding a
/// reference to its device's primary context, so it can outlive the
/// artifact), or a view of memory someone else owns (view: a descriptor's
/// buffers inside its storage).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  ~DeviceBuffer();

  /// Allocates `elements` int32 in the primary context of `device`.
  Status allocate(size_t elements, CUdevice device = 0);
  /// Views `elements` int32 at `data` in `context` (not freed here).
  void view(CUdeviceptr data, size_t elements, CUcontext context);
  CUdeviceptr get() const { return ptr; }
  size_t size() const { return elements; }
  /// Copies the buffer to the host (synchronous; for tests and tools).
  Status download(std::vector<int32_t> &out) const;

private:
  void release();
  CUdeviceptr ptr = 0;
  size_t elements = 0;
  CUcontext context = nullptr;
  CUdevice device = 0;
  bool owned = false;
};

/// The windows of a batch (docs/descriptor.md, "Windows"): `q` (`k`) when
/// cu_seqlens_q (cu_seqlens_k) is followed, in the same device buffer, by
/// int32 [2 x numSeqs]: per sequence, the position of its first present
/// query row (key) in the whole sequence and the whole sequence's length
/// (abi::kWindowFields). The rule sees row i and key j of the whole
/// sequence; the descriptor holds the present ones (the slots relative to
/// the first present key). Else the present rows (keys) are the whole
/// sequences.
struct Windows {
  bool q = false, k = false;
};

/// Host-known bounds that size the descriptor buffers and the grids.
struct Bounds {
  int32_t numSeqs = 0;
  int64_t totalQ = 0;
  int64_t maxSeqlenK = 0;
  /// Also build the column direction (for the backward pass; the artifact
  /// must have one), sized by the keys: totalK rows of at most maxSeqlenQ
  /// query columns.
  bool columns = false;
  int64_t totalK = 0;
  int64_t maxSeqlenQ = 0;
};

/// The descriptor buffers of one tile shape (docs/descriptor.md). In the
/// column direction "q" names the key side (the rows of the column spec).
struct TileBuffers {
  int64_t maxQTiles = 0;
  int32_t nktWords = 0;
  DeviceBuffer qTileBase, qTileSeq, counts, tileState, tileInfo, tileOffsets,
      tileEntries, tileOrder, envelopes, wordPrefix, tileWindowInfo,
      tileWindows, partialCounts;

  /// The buffer of tile-group argument `arg` (abi::tile_group::), or null
  /// for an argument that is not one of the shape's buffers.
  const DeviceBuffer *get(int arg) const {
    namespace g = abi::tile_group;
    switch (arg) {
    case g::QTileBase:
      return &qTileBase;
    case g::QTileSeq:
      return &qTileSeq;
    case g::Counts:
      return &counts;
    case g::TileState:
      return &tileState;
    case g::TileInfo:
      return &tileInfo;
    case g::TileOffsets:
      return &tileOffsets;
    case g::TileEntries:
      return &tileEntries;
    case g::TileOrder:
      return &tileOrder;
    case g::Envelopes:
      return &envelopes;
    case g::WordPrefix:
      return &wordPrefix;
    case g::TileWindowInfo:
      return &tileWindowInfo;
    case g::TileWindows:
      return &tileWindows;
    case g::PartialCounts:
      return &partialCounts;
    default:
      return nullptr;
    }
  }
  DeviceBuffer *get(int arg) {
    return const_cast<DeviceBuffer *>(std::as_const(*this).get(arg));
  }
};

/// One direction of the descriptor: the interval table and the tiles of
/// every shape of that direction.
struct DirectionBuffers {
  DeviceBuffer intervals, merged;
  std::vector<TileBuffers> tiles;
};

/// The batch a descriptor was last built for (by Artifact::preprocess):
/// the attention kernels read its sequences.
struct Batch {
  bool built = false;
  int32_t numSeqs = 0;
  int64_t totalQ = 0, totalK = 0;
  CUdeviceptr cuSeqlensQ = 0, cuSeqlensK = 0;
};

/// Reusable buffers for batches within the bounds they were made for. Use
/// one descriptor on one stream at a time: two preprocess calls in flight on
/// one descriptor race, and can hang the GPU (the second call's memset
/// clears the sync words the first call's kernel waits on).
///
/// Every buffer lies in one storage block, at offsets that depend on the
/// artifact and the bounds only (Artifact::descriptorBytes): the runtime's
/// own allocation (`storage`), or memory the caller owns (a PyTorch
/// tensor), so that a descriptor is a function of (storage, bounds) and
/// any number of them can exist at once.
struct Descriptor {
  Bounds bounds;
  DeviceBuffer storage; ///< empty when the caller owns the storage
  DirectionBuffers rows;
  DirectionBuffers columns; ///< built only when bounds.columns
  DeviceBuffer error;       ///< [1]: flags of the check phase (checked mode)
  /// The preprocess kernels' sync words (abi::stageBlocks), placed right
  /// after `error`: both are zeroed by one memset before each build.
  DeviceBuffer sync;
  Batch batch;
};

enum class DType { BF16, F16 };
const char *dtypeName(DType type);

/// A `[tokens, heads, head_dim]` view of a device tensor: the packed varlen
/// layout (a batched `[B, L, H, D]` tensor is `tokens = B * L` when its
/// batch stride is L times its token stride). Strides in elements; the
/// head dimension is contiguous.
struct TensorView {
  CUdeviceptr data = 0;
  DType dtype = DType::BF16;
  int64_t tokens = 0, heads = 0, headDim = 0;
  int64_t tokenStride = 0, headStride = 0;
};

/// One attention call on the batch the descriptor was last built for.
struct AttentionArgs {
  TensorView q, k,
      v;          ///< k and v: the same shape; q.heads a multiple of k.heads
  TensorView out; ///< like q
  CUdeviceptr lse = 0; ///< fp32 [q.heads, q.tokens], contiguous
  float scale = 0;     ///< softmax scale; 0: 1/sqrt(head_dim)
  /// Index into getShapes(); -1: the runtime's choice for the batch
  /// (Artifact::attentionShape).
  int tileShape = -1;
  /// Optional int32 [3], added to: query tiles x heads processed per state
  /// (partial, full, full but crossing k_len and so bounds-checked); GQA
  /// packed, the work items' (docs/attention.md, GQA packing).
  CUdeviceptr stats = 0;
  Schedule schedule = Schedule::Auto;
  /// GQA packing (Schedule.h): On fails for a head group that cannot pack.
  GqaPacking gqaPacking = GqaPacking::Auto;
  /// The persistent kernel's section of query heads (Schedule.h,
  /// launchSectionHeads): at least 1 (more than all heads: one section);
  /// 0 or less: the runtime's choice (the C API refuses less than 0).
  int sectionHeads = 0;
};

/// One backward call on the batch the descriptor was last built for, with
/// its column direction. dK and dV are deterministic; dQ is summed with fp32
/// atomics (its last bits may differ run to run) unless `deterministic`: then
/// the row pass (`<kernel>_dqr`, the row direction's 128x64 tiles) computes
/// it, bitwise the same run to run.
struct BackwardArgs {
  TensorView q, k, v, out, dout; ///< as in the forward; dout like out
  TensorView dq, dk, dv;         ///< like q, k, v
  CUdeviceptr lse = 0;           ///< the forward's fp32 [q.heads, q.tokens]
  /// Device scratch of backwardScratchBytes() bytes, 16-byte aligned.
  CUdeviceptr scratch = 0;
  float scale = 0; ///< 0: 1/sqrt(head_dim)
  bool deterministic = false;
  /// The longest query sequence (0: the descriptor's bounds.maxSeqlenQ with
  /// columns, else q.tokens); checked against the row intervals' list
  /// capacity (AttentionKernel::maxSeqlenQ), and it picks the dQ
  /// accumulator's path (abi::backward::firstStoreFor).
  int64_t maxSeqlenQ = 0;
};

/// Bytes of the backward's scratch: the fp32 dQ accumulator and the rows'
/// -LSE*log2(e) and delta = rowsum(dO * O).
/// The backward's device scratch for a batch of `numSeqs` sequences (the
/// descriptor's last batch) and `totalQ` query tokens.
size_t backwardScratchBytes(int64_t totalQ, int64_t numSeqs, int64_t heads,
                            int64_t headDim);

/// An attention kernel of the artifact (manifest "attention").
struct AttentionKernel {
  std::string name;
  int module = 0;        ///< index into the artifact's attention modules
  bool backward = false; ///< pass "backward": `pre` and `convert` too
  CUfunction fn = nullptr, pre = nullptr, convert = nullptr;
  /// Backward: the deterministic dQ pass over the row direction's tile
  /// shape `rowsShape` (null, -1: not in the artifact).
  CUfunction rows = nullptr;
  int rowsShape = -1;
  DType dtype = DType::BF16;
  int64_t headDim = 0;
  /// Backward without a column direction (manifest "intervals": "rows"):
  /// the main kernel lists the row direction's tiles of `shape` and masks
  /// with the row intervals, for query sequences up to maxSeqlenQ.
  bool rowIntervals = false;
  int64_t maxSeqlenQ = 0;
  /// Index into the row direction's shapes (forward, and backward with row
  /// intervals) or the column direction's (backward).
  int shape = -1;
  int64_t sharedBytes = 0, threads = 0;
  /// Forward: the persistent schedule (manifest "schedule").
  bool persistent = false;
  /// Backward (manifest "programmatic_launch"): the main kernel and `_dq`
  /// wait for the grid before them (griddepcontrol.wait) before they read
  /// what it writes, so they are launched as its programmatic dependents.
  bool programmaticLaunch = false;
  /// Backward: CMASK_DQ_FIRST_STORE as the artifact was loaded, for
  /// measurements: -1 unset (abi::backward::firstStoreFor decides), 0 never
  /// (the accumulator zeroed), 1 wherever the kernel has the first store
  /// (abi::backward::firstStore), grouped query heads and long sequences
  /// included.
  int dqFirstStore = -1;

  /// The kernel's functions with their arguments: the main kernel, then
  /// (backward) `_pre`, `_dq` and, with rowsShape, `_dqr`.
  std::vector<std::pair<std::string, const abi::Signature *>> functions() const;
};

class SchedulerPool;

class Artifact {
public:
  /// Loads `dir`/manifest.json and the module (cubin if present and the
  /// device matches, else PTX) into the device's primary context.
  static Status load(const std::string &dir, int device,
                     std::unique_ptr<Artifact> &out);
  /// Reads and checks `dir`/manifest.json as load does, without a device:
  /// its format, structure and every kernel's arguments against this
  /// runtime's (KernelABI.h). No CUDA call.
  static Status check(const std::string &dir);
  ~Artifact();

  const std::string &getSpec() const { return spec; }
  const std::vector<std::pair<std::string, MetadataRole>> &getMetadata() const {
    return metadata;
  }
  struct Shape {
    std::string name;
    int64_t q = 0, k = 0;
  };
  /// One direction: K and tile shapes (the column direction's come from
  /// the column spec `<spec>__columns`; its "q" is the key side).
  struct Direction {
    int64_t numSlots = 0;
    std::vector<Shape> shapes;
    bool present = false;
  };
  using Phase = abi::Phase;
  /// A kernel of the preprocess's launch plan: it runs its stages in order
  /// in one launch (abi::stageBlocks), each stage's phases on their
  /// direction (0 rows, 1 columns) and tile shape (-1: check and rows), and
  /// takes abi::stageKernelArgs(stages, metadata); its sync words start at
  /// `syncOffset` in the descriptor's sync buffer.
  struct StageKernel {
    std::string name;
    CUfunction fn = nullptr;
    using Item = abi::StageItem;
    std::vector<abi::Stage> stages;
    std::vector<abi::NamedArg> args;
    int64_t syncOffset = 0;
  };
  /// The sync words of every preprocess kernel (a descriptor's `sync`).
  int64_t getSyncWords() const { return syncWords; }
  const Direction &getRows() const { return rowDirection; }
  /// Null when the column mode is "rows" (no column descriptor).
  const Direction *getColumns() const {
    return columnDirection.present ? &columnDirection : nullptr;
  }
  /// "derived", "symmetric" or "rows" (docs/descriptor.md).
  const std::string &getColumnMode() const { return columnMode; }
  int64_t getNumSlots() const { return rowDirection.numSlots; }
  const std::vector<Shape> &getShapes() const { return rowDirection.shapes; }

  /// Allocates descriptor buffers for batches within `bounds` (and the
  /// column direction's when `bounds.columns`). Refuses bounds whose key
  /// (or query) tiles do not fit the tile-list entries (2^16 per sequence).
  /// A batch longer than the bounds sets error flag 8.
  /// With `storage` (device memory of at least descriptorBytes(bounds)
  /// bytes, kStorageAlignment-aligned, owned by the caller and outliving
  /// `out`) the buffers are placed there and nothing is allocated.
  Status createDescriptor(const Bounds &bounds, Descriptor &out,
                          CUdeviceptr storage = 0,
                          size_t storageBytes = 0) const;
  /// The bytes of a descriptor's storage for `bounds` (checked as
  /// createDescriptor checks them). Host arithmetic only.
  Status descriptorBytes(const Bounds &bounds, size_t &bytes) const;
  /// Alignment of the storage and of every buffer in it.
  static constexpr size_t kStorageAlignment = 256;

  /// Declares that `d` holds the descriptor of this batch (built by an
  /// earlier preprocess into the same storage), for attention calls on a
  /// descriptor created over storage the caller keeps between calls.
  /// Checks the batch against the bounds as preprocess does.
  Status setBatch(Descriptor &d, int32_t numSeqs, int64_t totalQ,
                  int64_t totalK, CUdeviceptr cuSeqlensQ,
                  CUdeviceptr cuSeqlensK) const;

  /// Launches every phase on `stream` for a batch of `numSeqs` sequences
  /// with `totalQ` query rows and `totalK` keys (within the descriptor's
  /// bounds); cu_seqlens are device int32 [numSeqs + 1]; `metadata` follows
  /// getMetadata(). The column direction is built too when the descriptor
  /// has one.
  ///
  /// Inconsistent metadata content never makes the kernels read or write
  /// out of bounds. With `checked`, the check phase also runs and records
  /// what is wrong in the descriptor's error flags (readErrorFlags: 1 =
  /// cu_seqlens, 2 = offsets starts, 4 = offsets values, 16 = a window
  /// outside its sequence).
  ///
  /// `windows` (Windows) make the descriptor one of a window of the batch:
  /// the sequences' present rows and keys are ranges of longer sequences.
  Status preprocess(Descriptor &d, int32_t numSeqs, int64_t totalQ,
                    int64_t totalK, CUdeviceptr cuSeqlensQ,
                    CUdeviceptr cuSeqlensK,
                    const std::vector<MetadataArg> &metadata, CUstream stream,
                    bool checked = false, const Windows &windows = {}) const;

  /// Whether the attention kernels can run here; else why not (no kernels
  /// in the artifact, or not an sm_90 device).
  bool hasAttention() const { return !attentionModules.empty(); }
  const std::string &getAttentionUnavailable() const {
    return attentionUnavailable;
  }
  const std::vector<AttentionKernel> &getAttentionKernels() const {
    return attentionKernels;
  }
  /// The row tile shape the forward uses by default (-1: none).
  int getDefaultAttentionShape() const { return defaultAttentionShape; }
  /// The tile shape (index into getShapes()) of an attention call with
  /// tileShape -1 on the batch `d` was last built for: the default, or,
  /// unless the artifact fixed it (--attention-tile), 128x128 on short
  /// sequences where the default is 128x64 (rt::chooseSquareTiles); -1
  /// where attention cannot run.
  int attentionShape(const Descriptor &d) const;

  /// Launches the forward attention on `stream` for the batch `d` was last
  /// built for. Checks dtypes, shapes, strides, alignment, head counts and
  /// the batch sizes first; nothing is launched when they are wrong.
  Status attentionForward(const Descriptor &d, const AttentionArgs &args,
                          CUstream stream) const;

  /// Launches the backward (pre-pass, main kernel, dQ conversion) on
  /// `stream`. The descriptor must hold the column direction (created with
  /// bounds.columns). Checks the arguments as attentionForward does.
  Status attentionBackward(const Descriptor &d, const BackwardArgs &args,
                           CUstream stream) const;

  /// Waits for `stream` and returns the error flags of the last checked
  /// preprocess (0 when the metadata were valid). Synchronizes: for tests
  /// and debugging, not the hot path.
  Status readErrorFlags(Descriptor &d, CUstream stream, int32_t &flags) const;

private:
  Artifact() = default;
  CUcontext context = nullptr;
  CUdevice device = 0;
  CUmodule module = nullptr;
  std::string spec, columnMode;
  std::vector<std::pair<std::string, MetadataRole>> metadata;
  /// The artifact's kernel argument lists (manifest "kernel_abi").
  ManifestABI kernelABI;
  Direction rowDirection, columnDirection;
  /// The preprocess kernels in launch order, and their sync words in all.
  std::vector<StageKernel> preprocessKernels;
  int64_t syncWords = 0;
  /// The attention modules (manifest "attention.modules"): the file each
  /// loads (its cubin, else its PTX), and the loaded modules.
  std::vector<std::string> attentionModuleFiles;
  std::vector<CUmodule> attentionModules;
  std::vector<AttentionKernel> attentionKernels;
  /// The forward's persistent grid: CTAs resident at once (one per SM) and
  /// the counters its CTAs claim work items from.
  int64_t residentCTAs = 0;
  std::unique_ptr<SchedulerPool> schedulers;
  int defaultAttentionShape = -1;
  /// The 128x128 shape a call naming no tile may run instead of the default
  /// (attentionShape): -1 unless the manifest's attention.tile_choice is
  /// "runtime" and the artifact has 128x128 forward kernels.
  int squareAttentionShape = -1;
  std::string attentionUnavailable;
  /// Everything load reads from the manifest (into `m`, the artifact's
  /// `arch`) and checks, before any CUDA call.
  Status readManifest(const std::string &dir, json::Value &m,
                      std::string &arch);
  /// Reads the manifest's "attention" and checks its kernels' arguments
  /// (before any CUDA call).
  Status parseAttention(const std::string &dir, const json::Value &manifest);
  /// Loads the attention modules parseAttention read and their functions
  /// (sm_90 only).
  Status loadAttention(const std::string &dir, const std::string &deviceArch);
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_RUNTIME_H
