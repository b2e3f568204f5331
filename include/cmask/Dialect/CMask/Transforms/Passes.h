//===- Passes.h - cmask passes ----------------------------------*- C++ -*-===//
//
// The dialect's passes (Passes.td): cmask-require-spec,
// cmask-transpose-spec, cmask-normalize-dnf, cmask-extract-intervals,
// cmask-canonicalize-slots, and the pipeline cmask-lower-to-intervals that
// chains the last three.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_H
#define CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::cmask {

#define GEN_PASS_DECL
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"

/// Adds the MaskSpec-to-intervals lowering (normalize-dnf, extract-intervals,
/// canonicalize-slots), nested on every cmask.spec, to `pm`; `normalize`
/// sets the normalization's limits.
void buildLowerToIntervalsPipeline(
    OpPassManager &pm, const NormalizeDNFPassOptions &normalize = {});

/// Registers `cmask-lower-to-intervals`.
void registerCMaskPipelines();

#define GEN_PASS_REGISTRATION
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"

} // namespace mlir::cmask

#endif // CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_H
