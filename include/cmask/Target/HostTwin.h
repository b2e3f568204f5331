//===- HostTwin.h - Run the preprocess on the CPU ---------------*- C++ -*-===//
//
// The CPU lowering of a spec's preprocess, JIT-compiled with the MLIR
// ExecutionEngine: the tests run it on random metadata and compare what it
// builds with the evaluator (cmask-translate --cmask-to-descriptor-json).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_HOSTTWIN_H
#define CMASK_TARGET_HOSTTWIN_H

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Target/Evaluator.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::cmask {

/// What the preprocess builds for one batch and one tile shape
/// (docs/descriptor.md), as the CPU lowering computed it.
struct TileDescriptor {
  TileShape shape;
  int64_t numQTiles = 0, nktWords = 0;
  std::vector<int32_t> qTileSeq, qTileBase, tileState, tileOffsets,
      tileEntries, tileOrder;
};
struct Descriptor {
  std::vector<int32_t> intervals; ///< [total_q, K, 2]
  int32_t errorFlags = 0;         ///< what the check phase reported
  std::vector<TileDescriptor> tiles;
};

class HostTwin {
public:
  /// Compiles `spec` (in rule form) to slots, builds and JITs its preprocess
  /// for the tile `shapes`.
  static FailureOr<std::unique_ptr<HostTwin>>
  create(SpecOp spec, llvm::ArrayRef<TileShape> shapes);
  ~HostTwin();

  /// Runs every phase on one batch.
  FailureOr<Descriptor> run(const BatchMetadata &batch, Location loc);

  int64_t getNumSlots() const { return numSlots; }

private:
  HostTwin() = default;
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
  PreprocessNames names;
  std::vector<std::pair<std::string, MetadataRole>> metadata;
  int64_t numSlots = 0;
};

} // namespace mlir::cmask

#endif // CMASK_TARGET_HOSTTWIN_H
