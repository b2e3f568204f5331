//===- PreprocessPhases.h - Internal phase builders -------------*- C++ -*-===//
//
// Internal to the preprocess builder (Preprocess.cpp): the item functions of
// its phases, one per file (docs/descriptor.md, "Phases"), and what they
// share. An item function takes the item's index, then its argument group:
// the row group for the row and check phases, the tile group for the tile
// phases (cmask_runtime/KernelABI.h).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_PREPROCESSPHASES_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_PREPROCESSPHASES_H

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask_runtime/KernelABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask {
class Emitter;
} // namespace mlir::cmask

namespace mlir::cmask::preprocess {

/// The GPU module that holds every preprocess kernel built into a module
/// (the row and the column direction's): one PTX file.
inline constexpr llvm::StringLiteral kGPUModuleName = "cmask_preprocess";

/// Adds the private item function `<name>_item` of the row or check phase,
/// without a body: the item (index), then the row group (num_seqs,
/// cu_seqlens_rows, cu_seqlens_cols, the metadata, intervals, merged,
/// error).
func::FuncOp addRowGroupItem(OpBuilder &b, Location loc, SpecOp spec,
                             llvm::StringRef name);

/// Argument k of the row group's head (abi::row_group_head), of its tail
/// (abi::row_group_tail), in an item function's arguments.
template <typename Args> auto rowHeadArg(Args args, int k) {
  return args[1 + k];
}
template <typename Args> auto rowTailArg(Args args, int k) {
  return args[args.size() - ::cmask::abi::row_group_tail::kNumArgs + k];
}

/// Where field `field` of sequence `b`'s window lies in its cu_seqlens buffer
/// (after the num_seqs + 1 starts; KernelABI.h, row_group_head).
Value windowField(Emitter &e, Value numSeqs, Value b, int64_t field);

/// Adds the row phase's item function `<name>_item` (RowPhase.cpp): one
/// packed row's interval slots and merged slots. Fails, with a diagnostic
/// at the region, where a region is not in slot form or its terms cannot
/// be analysed.
FailureOr<func::FuncOp> buildRowItem(OpBuilder &b, Location loc, SpecOp spec,
                                     llvm::StringRef name, int64_t numSlots,
                                     PreprocessTarget target);

/// Adds the check phase's item function `<name>_item` (CheckPhase.cpp): one
/// sequence's metadata validated into error[0].
func::FuncOp buildCheckItem(OpBuilder &b, Location loc, SpecOp spec,
                            llvm::StringRef name, int64_t numSlots);

/// The signature shared by the tile-phase item functions (TilePhases.cpp).
llvm::SmallVector<Type> tilePhaseArgTypes(OpBuilder &b);

/// Adds the item functions of the tile phases for one tile shape, named
/// `<prefix>_<phase>_item`, in launch order (see TilePhases.cpp).
llvm::SmallVector<func::FuncOp> buildTilePhases(OpBuilder &b, Location loc,
                                                llvm::StringRef prefix,
                                                int64_t tq, int64_t tk,
                                                int64_t numSlots);

} // namespace mlir::cmask::preprocess

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_PREPROCESSPHASES_H
