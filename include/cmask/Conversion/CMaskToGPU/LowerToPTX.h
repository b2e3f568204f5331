//===- LowerToPTX.h - gpu/nvgpu/nvvm to PTX ---------------------*- C++ -*-===//
//
// The one lowering of cmask's GPU code (the preprocess stage kernels and the
// attention kernels) to NVVM and PTX: the pipelines cmask-gpu-to-nvvm and
// cmask-gpu-to-binary (registered in cmask/Pipelines/Pipelines.h), i.e. the
// stock GPU-to-NVVM stages plus cmask-mark-tensor-map-args, and lowerToPTX,
// the second run on a module of one gpu.module.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H
#define CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir::cmask {

/// What the NVVM lowering targets.
struct GPUTarget {
  std::string chip = "sm_90a";
  /// PTX 8.1: red.global.add.v4.f32 (the backward's dQ).
  std::string features = "+ptx81";
  int optLevel = 3;
};

/// The stages of the stock gpu-lower-to-nvvm-pipeline up to (not including)
/// gpu-module-to-binary, after the inliner (the preprocess's stage kernels
/// call item functions), then cmask-mark-tensor-map-args.
void buildGPUToNVVMPipeline(OpPassManager &pm, const GPUTarget &target);

/// buildGPUToNVVMPipeline, then gpu-module-to-binary with `format` (isa:
/// PTX; bin, fatbin: assembled by the MLIR NVVM target's ptxas).
void buildGPUToBinaryPipeline(OpPassManager &pm, const GPUTarget &target,
                              llvm::StringRef format = "isa");

/// The dialects, translations and interfaces the lowering needs.
void registerGPULowering(DialectRegistry &registry);

/// Lowers `module` (one gpu.module) to PTX for `chip` (e.g. sm_90a). Errors
/// are reported at `loc`.
FailureOr<std::string> lowerToPTX(ModuleOp module, llvm::StringRef chip,
                                  Location loc);

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_CMASKTOGPU_LOWERTOPTX_H
