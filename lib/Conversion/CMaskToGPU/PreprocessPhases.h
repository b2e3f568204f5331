//===- PreprocessPhases.h - Internal phase builders -------------*- C++ -*-===//
//
// Internal to the preprocess builder: the tile phases' item functions
// (TilePhases.cpp), used by Preprocess.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_PREPROCESSPHASES_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_PREPROCESSPHASES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask::preprocess {

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
