//===- Attention.h - Descriptor-driven attention kernels --------*- C++ -*-===//
//
// The attention kernels for Hopper (sm_90a), built through the
// gpu/nvgpu/nvvm/llvm dialects and specialised on the element type, the
// head dimension, the tile shape and the slot count K of the spec
// (docs/attention.md): the variants, the builders of the forward
// (AttentionForward.cpp) and the backward (AttentionBackward.cpp), and the
// entry points that build or compile them all (AttentionKernels.cpp).
//
// The forward: a CTA computes 128 query rows of one head with three
// warpgroups: a producer whose single thread streams the K/V tiles of the
// query tile's list (the Execution Descriptor's CSR tile lists, heaviest
// query tiles first) through a TMA + mbarrier ring, and two consumers of 64
// rows each that run S = QK^T and O += PV with wgmma, the online softmax in
// fp32 on the accumulator fragments, and, in partial tiles only, the
// interval check of the slots that intersect the tile. Grid: (max q tiles x
// num_heads); 384 threads; sharedBytes() of dynamic shared memory. Every
// kernel's arguments are those of cmask_runtime/KernelABI.h (tensor maps
// by value as grid constants, then pointers and scalars).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_CMASKTOGPU_ATTENTION_H
#define CMASK_CONVERSION_CMASKTOGPU_ATTENTION_H

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <optional>
#include <string>

namespace mlir::cmask {

enum class ElementType { BF16, F16 };
llvm::StringRef stringifyElementType(ElementType type);
std::optional<ElementType> parseElementType(llvm::StringRef text);

/// One forward kernel: what it is specialised on.
struct AttentionVariant {
  ElementType dtype = ElementType::BF16;
  int64_t headDim = 128;
  TileShape tile;       ///< 128 query rows x 64 or 128 keys
  int64_t numSlots = 1; ///< K: slots per row of the interval table
  /// The schedule: false, one CTA per work item (head, query tile); true,
  /// one CTA per SM claiming items from a counter until none is left
  /// (AttentionForward.cpp; the runtime chooses per call,
  /// docs/attention.md).
  bool persistent = false;

  static constexpr int64_t kThreads = 384;
  /// The bytes of the largest dynamic shared memory a CTA may use on sm_90.
  static constexpr int64_t kMaxSharedBytes = 232448;

  /// `<prefix>_fwd_<dtype>_d<D>_<QxK>` (+ `_persistent`).
  std::string kernelName(llvm::StringRef prefix) const;
  /// Depth of the K and V rings: as many stage pairs as shared memory
  /// holds, 2 to 4, and one more V stage where it fits (SharedLayout).
  int64_t kStages() const;
  int64_t vStages() const;
  /// Dynamic shared memory of the kernel, in bytes.
  int64_t sharedBytes() const;
};

/// Whether the forward kernel handles tiles of this shape (128 x 64 and
/// 128 x 128); the descriptor may hold other shapes.
inline bool isAttentionTile(const TileShape &tile) {
  return tile.q == 128 && (tile.k == 64 || tile.k == 128);
}

/// A variant per (element type, head dimension, attention tile among
/// `shapes`), in that order.
llvm::SmallVector<AttentionVariant>
getAttentionVariants(llvm::ArrayRef<TileShape> shapes, int64_t numSlots,
                     llvm::ArrayRef<int64_t> headDims,
                     llvm::ArrayRef<ElementType> dtypes);

/// Empty when the builder supports `variant`; else what is not supported.
std::optional<std::string>
checkAttentionVariant(const AttentionVariant &variant);

/// Indices of the kernel arguments that are tensor maps (passed by value as
/// grid constants): cmask-mark-tensor-map-args marks them once the kernel is
/// an llvm.func.
inline constexpr llvm::StringLiteral kTensorMapArgsAttr =
    "cmask.tensor_map_args";

/// One backward: specialised on the element type, head dimension and the
/// slot counts; key tiles of 128 keys walk query tiles of 64. With a column
/// direction (rowTileK 0) the main kernel walks its lists (column tile shape
/// 128x64) and masks with the column intervals; without one (column mode
/// rows) each CTA lists its query tiles from the row direction's tiles of
/// 128 x rowTileK and masks with the row intervals (AttentionBackward.cpp).
struct BackwardVariant {
  ElementType dtype = ElementType::BF16;
  int64_t headDim = 128;
  int64_t numSlots = 1; ///< Kc: slots per key of the column interval table
  int64_t rowSlots = 1; ///< K: slots per query of the row interval table
  /// 0: the column direction; 64 or 128: the row direction's tile shape
  /// 128 x rowTileK that the main kernel reads instead.
  int64_t rowTileK = 0;

  /// `<prefix>_bwd_<dtype>_d<D>` (+ `_pre`, `_dq`, `_dqr`).
  std::string kernelName(llvm::StringRef prefix) const;
  int64_t sharedBytes() const;
  /// Row intervals only: the most query tiles (of 64) one key tile's list
  /// holds (in shared memory), so the longest query sequence is 64 times it.
  int64_t rowListCapacity() const;
};
std::optional<std::string> checkBackwardVariant(const BackwardVariant &variant);

/// The backward variants of a spec's preprocess `parts` (the rows, then the
/// column spec if the spec has a column direction) for every (element type,
/// head dimension): over the column direction when it has the column tile
/// shape 128x64; without one (column mode rows) over the row direction's
/// 128x128 (else 128x64) tiles with the row intervals. None when the needed
/// tile shape is missing: `why` says which.
llvm::SmallVector<BackwardVariant>
getBackwardVariants(llvm::ArrayRef<PreprocessPart> parts,
                    llvm::ArrayRef<ElementType> dtypes,
                    llvm::ArrayRef<int64_t> headDims, std::string &why);

/// Adds the backward's kernels `name_pre`, `name`, `name_dq` and `name_dqr`
/// (AttentionBackward.cpp documents their ABI) to `gpuModule`.
void buildAttentionBackward(gpu::GPUModuleOp gpuModule, llvm::StringRef name,
                            const BackwardVariant &variant, Location loc);

/// Adds the forward kernel `name` for `variant` to `gpuModule`.
gpu::GPUFuncOp buildAttentionForward(gpu::GPUModuleOp gpuModule,
                                     llvm::StringRef name,
                                     const AttentionVariant &variant,
                                     Location loc);

/// Every variant's kernel `variant.kernelName(prefix)` (forward, then
/// backward) in `gpu.module @cmask_attention` of `module`.
LogicalResult
buildAttentionKernels(ModuleOp module, llvm::StringRef prefix,
                      llvm::ArrayRef<AttentionVariant> variants, Location loc,
                      llvm::ArrayRef<BackwardVariant> backward = {});

/// Every kernel buildAttentionKernels makes for `variants` and `backward`
/// (named with `prefix`), with its arguments as the kernel ABI lists them
/// (cmask_runtime/KernelABI.h): what the manifest records.
std::vector<std::pair<std::string, std::vector<::cmask::abi::NamedArg>>>
getAttentionKernelABI(llvm::StringRef prefix,
                      llvm::ArrayRef<AttentionVariant> variants,
                      llvm::ArrayRef<BackwardVariant> backward);

/// The variants' kernels in a fresh module, lowered to PTX for `chip`.
FailureOr<std::string>
compileAttentionToPTX(llvm::StringRef prefix,
                      llvm::ArrayRef<AttentionVariant> variants,
                      llvm::StringRef chip, Location loc,
                      llvm::ArrayRef<BackwardVariant> backward = {});

/// compileAttentionToPTX in a context of its own, touching no other: safe
/// on several threads at once. The PTX, or std::nullopt with the
/// compiler's diagnostics in `error`.
std::optional<std::string> compileAttentionPTX(
    llvm::StringRef prefix, llvm::ArrayRef<AttentionVariant> variants,
    llvm::StringRef chip, llvm::ArrayRef<BackwardVariant> backward,
    std::string &error);

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_CMASKTOGPU_ATTENTION_H
