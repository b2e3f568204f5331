//===- Artifact.h - The artifact the runtime loads --------------*- C++ -*-===//
//
// The artifact directory the runtime loads (docs/artifact.md): which
// attention kernels a spec gets, writeArtifact (PTX, cubins,
// manifest.json with the kernel ABI) and the `--cmask-to-artifact` entry
// point of cmask-translate.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_ARTIFACT_H
#define CMASK_TARGET_ARTIFACT_H

#include "cmask/Conversion/CMaskToGPU/Attention.h"
#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Target/Columns.h"

namespace mlir::cmask {

/// The attention variants of every (element type, head dimension, tile
/// shape among `shapes` that the forward kernel handles), checked; an error
/// at `loc` when there is none or one is unsupported.
FailureOr<llvm::SmallVector<AttentionVariant>>
selectAttentionVariants(Location loc, llvm::ArrayRef<TileShape> shapes,
                        int64_t numSlots, llvm::ArrayRef<int64_t> headDims,
                        llvm::ArrayRef<ElementType> dtypes);

/// What the artifact holds of attention kernels.
struct AttentionOptions {
  bool enabled = true; ///< false for sm_80 (no TMA/wgmma): preprocess only
  llvm::SmallVector<int64_t> headDims = {64, 128};
  llvm::SmallVector<ElementType> dtypes = {ElementType::BF16, ElementType::F16};
  /// The tile shape the runtime uses unless told otherwise; by default
  /// 128x64 when K > 2 (many partial tiles, e.g. CLEAR), else 128x128
  /// (docs/performance.md has the measurements behind it).
  std::optional<TileShape> defaultTile;
  /// Threads compiling the attention modules (one per element type and head
  /// dimension) and their ptxas runs; 0: every hardware thread. The
  /// artifact does not depend on it.
  unsigned jobs = 0;
  /// Arguments added to ptxas for the attention modules' cubins (tuning
  /// experiments, e.g. --allow-expensive-optimizations=false); the PTX is
  /// the same whatever they are.
  llvm::SmallVector<std::string> ptxasOptions;
};

/// Compiles `spec` (rule form) and writes preprocess.ptx, the attention
/// modules (sm_90a: attention_<dtype>_d<head dim>.ptx), their cubins (when
/// ptxas is found) and manifest.json into `dir`.
LogicalResult writeArtifact(SpecOp spec, llvm::StringRef dir,
                            llvm::ArrayRef<TileShape> shapes,
                            llvm::ArrayRef<TileShape> columnShapes,
                            llvm::StringRef arch,
                            const AttentionOptions &attention, bool verbose);

/// `cmask-translate SPEC --cmask-to-artifact -o DIR [--arch=..]
/// [--tile-shapes=..] [--head-dims=..] [--dtypes=..] [--attention-tile=..]
/// [--jobs=N]`:
/// a directory output, which mlir-translate's file output cannot express,
/// so cmask-translate dispatches it here.
int artifactMain(int argc, char **argv);

} // namespace mlir::cmask

#endif // CMASK_TARGET_ARTIFACT_H
