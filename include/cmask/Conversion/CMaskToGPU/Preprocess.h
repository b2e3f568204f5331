//===- Preprocess.h - The mask-specific preprocess in scf form --*- C++ -*-===//
//
// Builds the preprocess of a MaskSpec (in slot form) as plain functions over
// memrefs (func/scf/arith/memref): one function per phase computing one
// work item, and a host wrapper per phase that loops over the items. The
// same item functions are lowered to the CPU (the host twin, run by the
// tests through the ExecutionEngine) and wrapped in GPU kernels.
//
// ABI of the row phase (docs/descriptor.md):
//   @cmask_<spec>_rows(%n_rows: index, %num_seqs: i32,
//                      %cu_seqlens_q: memref<?xi32>,
//                      %cu_seqlens_k: memref<?xi32>,
//                      <metadata in declaration order>,
//                      %intervals: memref<?xi32>, %merged: memref<?xi32>,
//                      %error: memref<?xi32>)
// where a scalar is an i32, a per-sequence value a memref<?xi32> [B], and
// offsets two memref<?xi32>: the values and their per-sequence starts [B+1].
// `merged` receives each row's non-empty slots sorted and merged (the tile
// phases read it to decide full tiles). `@cmask_<spec>_check` takes the same
// arguments, one item per sequence, and ORs metadata errors into error[0]
// (1: cu_seqlens, 2: offsets starts, 4: offsets values). The tile phases of
// each shape follow in TilePhases.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H
#define CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"
#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/KernelABI.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::cmask {

/// A tile shape of the descriptor: TQ query rows x TK key columns.
struct TileShape {
  int64_t q = 128, k = 128;
  std::string str() const {
    return std::to_string(q) + "x" + std::to_string(k);
  }
};

/// The most slots per row the descriptor's entry words can name (7 bits).
inline constexpr int64_t kMaxDescriptorSlots = ::cmask::abi::kMaxSlots;

/// Parses "AxB,CxD,..." (positive integers). On failure returns nullopt
/// and sets `bad` to the offending item.
std::optional<llvm::SmallVector<TileShape>>
parseTileShapeList(llvm::StringRef text, std::string &bad);

/// The host wrappers buildPreprocess creates (each loops over the items of
/// its phase: `(%num_items: index, <the item function's arguments>)`).
struct PreprocessNames {
  std::string rows;  ///< one item per packed row: slots and merged slots
  std::string check; ///< one item per sequence: metadata checks (same args)
  struct Tiles {
    TileShape shape;
    std::string prefix; ///< `cmask_<spec>_<QxK>`
    /// The phases in launch order (TilePhases.cpp documents them).
    std::string seqs, envinit, env, tiles, pack, count, scan, fill;
  };
  std::vector<Tiles> tiles;
};
PreprocessNames getPreprocessNames(SpecOp spec,
                                   llvm::ArrayRef<TileShape> shapes);

/// Where the phases run: on the CPU, a host wrapper per phase loops over the
/// items (with `llvm.emit_c_interface`; `(%num_items: index, <the item
/// function's arguments>)`); on the GPU, the item functions go into
/// `gpu.module @cmask_preprocess` and compilePreprocessToPTX wraps them in
/// the preprocess kernel(s) (one item per thread; see StageKernel).
enum class PreprocessTarget { CPU, GPU };

/// Adds the preprocess functions of `spec` for the tile `shapes` to
/// `module`. The spec must be in slot form (after cmask-lower-to-intervals).
LogicalResult buildPreprocess(SpecOp spec, ModuleOp module,
                              llvm::ArrayRef<TileShape> shapes,
                              PreprocessTarget target = PreprocessTarget::CPU);

/// A spec (in slot form) and the tile shapes to build its preprocess for.
struct PreprocessPart {
  SpecOp spec;
  llvm::SmallVector<TileShape> shapes;
};

/// The phases of the preprocess (docs/descriptor.md; their arguments:
/// cmask_runtime/KernelABI.h).
using Phase = ::cmask::abi::Phase;

/// How the GPU runs the preprocess: kernels launched in order, each running
/// one or more stages in order within its launch (abi::stageBlocks: a
/// block waits for the stage before it through the kernel's `sync`
/// buffer). The phases of one stage do not depend on each other. One
/// kernel runs every stage for every argument group while its parameters
/// stay under CUDA's 4 KB limit; otherwise the groups are packed in order
/// into successive kernels, each running every stage. A kernel takes the item
/// count of each of its phases (index), the argument group of each
/// (direction, shape) its phases use, in order of first use (the row-phase
/// arguments for check/rows, shape -1; the tile-phase arguments
/// otherwise), then `sync` (abi::stageKernelArgs); item `x` of a stage runs
/// phase `p` on item `x - (items of the stage's phases before p)`.
struct StageKernel {
  /// A phase: its direction (an index into the parts: 0 rows, 1 columns)
  /// and shape (an index into the direction's shapes; -1 for check/rows).
  using Item = ::cmask::abi::StageItem;
  std::string name;
  std::vector<::cmask::abi::Stage> stages;
};
using LaunchPlan = std::vector<StageKernel>;

/// The spec's metadata as the kernel ABI lists them (name, role), in
/// declaration order.
std::vector<std::pair<std::string, ::cmask::abi::MetadataRole>>
getABIMetadata(SpecOp spec);

/// The arguments of a stage kernel of `spec`'s plan (KernelABI.h): what the
/// kernel takes and the manifest lists.
std::vector<::cmask::abi::NamedArg>
getStageKernelArgs(const StageKernel &kernel, SpecOp spec);

/// Builds the GPU preprocess of every part (the row direction, and the
/// column direction's spec) into `module`: the item functions and the stage
/// kernels of the returned plan, in `gpu.module @cmask_preprocess` (the
/// convert-cmask-to-gpu pass).
FailureOr<LaunchPlan> buildGPUPreprocess(llvm::ArrayRef<PreprocessPart> parts,
                                         ModuleOp module);

struct CompiledPreprocess {
  std::string ptx;
  LaunchPlan plan;
};

/// buildGPUPreprocess in a fresh module, lowered through the GPU/NVVM
/// dialects to PTX for `chip` (e.g. sm_90a, sm_80).
FailureOr<CompiledPreprocess>
compilePreprocessToPTX(llvm::ArrayRef<PreprocessPart> parts,
                       llvm::StringRef chip);

/// Lowers a module built by buildPreprocess to the LLVM dialect for the CPU.
LogicalResult lowerPreprocessToLLVM(ModuleOp module);

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H
