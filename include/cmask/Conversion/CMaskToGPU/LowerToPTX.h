//===- LowerToPTX.h - gpu/nvgpu/nvvm to PTX ---------------------*- C++ -*-===//
//
// The one lowering of cmask's GPU code (the preprocess stage kernels and the
// attention kernels) to PTX: the stock GPU-to-NVVM pipeline
// (mlir/lib/Dialect/GPU/Pipelines), plus one step the stock
// pipeline lacks: kernel arguments listed in `cmask.tensor_map_args` become
// 128-byte by-value grid constants (`.param .align 64 .b8 [128]`), so the
// runtime passes CUtensorMaps as launch parameters and TMA reads them in
// parameter space (no per-call upload).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H
#define CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir::cmask {

/// The dialects, translations and interfaces the lowering needs.
void registerGPULowering(DialectRegistry &registry);

/// Lowers `module` (one gpu.module) to PTX for `chip` (e.g. sm_90a). Errors
/// are reported at `loc`.
FailureOr<std::string> lowerToPTX(ModuleOp module, llvm::StringRef chip,
                                  Location loc);

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H
