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
#include "cmask/Target/Columns.h"
#include "cmask/Target/Evaluator.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <optional>
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
  std::vector<int32_t> qTileSeq, qTileBase, tileState, tileOffsets, tileEntries,
      tileOrder, tileWindows, partialCounts;
};
/// One direction of the descriptor: the row direction (query rows over key
/// columns) or the column direction (key columns over query rows, built by
/// the same phases from the column spec with the roles of q and k swapped).
struct DirectionDescriptor {
  std::vector<int32_t> intervals; ///< [total rows, K, 2]
  std::vector<TileDescriptor> tiles;
};
struct Descriptor {
  DirectionDescriptor rows;
  std::optional<DirectionDescriptor> columns; ///< unless the mode is rows
  int32_t errorFlags = 0;                     ///< what the check phase reported
};

class HostTwin {
public:
  /// Compiles `spec` (in rule form) to slots, derives its column direction
  /// (cmask/Target/Columns.h), builds and JITs the preprocess of the rows
  /// for the tile `shapes` (TQ x TK) and of the columns for `columnShapes`
  /// (TK x TQ: key rows by query columns).
  static FailureOr<std::unique_ptr<HostTwin>>
  create(SpecOp spec, llvm::ArrayRef<TileShape> shapes,
         llvm::ArrayRef<TileShape> columnShapes);
  ~HostTwin();

  /// Runs every phase of both directions on one batch (within checkSize).
  FailureOr<Descriptor> run(const BatchMetadata &batch, Location loc);

  /// Why the descriptor of `batch` is too large for the CPU twin (more than
  /// kMaxWords int32 words in all, or more key tiles per sequence than the
  /// entry words hold); nullopt when it is not.
  std::optional<std::string> checkSize(const BatchMetadata &batch) const;
  /// The most int32 words the twin allocates for one batch (256 MB).
  static constexpr int64_t kMaxWords = int64_t(1) << 26;

  int64_t getNumSlots() const { return rows.numSlots; }
  ColumnMode getColumnMode() const { return columnMode; }
  /// K of the column direction (0 when the mode is rows).
  int64_t getNumColumnSlots() const { return columns ? columns->numSlots : 0; }

private:
  struct Direction {
    PreprocessNames names;
    int64_t numSlots = 0;
  };
  HostTwin() = default;
  FailureOr<DirectionDescriptor> runDirection(
      const Direction &dir, llvm::ArrayRef<int32_t> cuRows,
      llvm::ArrayRef<int32_t> cuCols, llvm::ArrayRef<int32_t> windowRows,
      llvm::ArrayRef<int32_t> windowCols, llvm::ArrayRef<void *> metadataArgs,
      void *errorArg, bool checked, Location loc);

  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
  std::vector<std::pair<std::string, MetadataRole>> metadata;
  Direction rows;
  std::optional<Direction> columns;
  ColumnMode columnMode = ColumnMode::Rows;
};

} // namespace mlir::cmask

#endif // CMASK_TARGET_HOSTTWIN_H
