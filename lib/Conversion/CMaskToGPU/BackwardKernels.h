//===- BackwardKernels.h - The backward's kernel builders -------*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: one builder per backward kernel
// (AttentionBackward.cpp composes them), each filling `func`, a kernel made
// with its ABI signature (KernelSignature.h).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKERNELS_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKERNELS_H

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::cmask {

/// `<name>_pre` (BackwardRowwise.cpp): delta and mlse per (query row, head).
void buildBackwardPre(OpBuilder &b, Location loc, const BackwardVariant &v,
                      gpu::GPUFuncOp func);
/// `<name>_dq` (BackwardRowwise.cpp): dQ from the blocked accumulator.
void buildBackwardConvert(OpBuilder &b, Location loc, const BackwardVariant &v,
                          gpu::GPUFuncOp func);
/// `<name>` (BackwardKeyTile.cpp; BackwardKeyTileRows.cpp when
/// v.rowTileK): dK, dV and the dQ accumulator.
void buildBackwardKeyTile(OpBuilder &b, Location loc, const BackwardVariant &v,
                          gpu::GPUFuncOp func);
/// `<name>_dqr` (BackwardQueryTile.cpp): deterministic dQ.
void buildBackwardQueryTile(OpBuilder &b, Location loc,
                            const BackwardVariant &v, gpu::GPUFuncOp func);

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKERNELS_H
