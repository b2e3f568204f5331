//===- Pipelines.h - The registered GPU pipelines of cmask ------*- C++ -*-===//
//
// From a MaskSpec to PTX in three registered pipelines, every step a pass
// (so `--mlir-print-ir-after-all` shows each stage):
//
//   cmask-spec-to-gpu     the column direction (cmask-derive-columns), the
//                         slots (cmask-lower-to-intervals) and
//                         convert-cmask-to-gpu: the preprocess and attention
//                         kernels in the gpu/nvgpu/nvvm/scf/arith dialects
//   cmask-gpu-to-nvvm     those kernels as llvm.func in NVVM + LLVM, the
//                         tensor-map arguments grid constants
//   cmask-gpu-to-binary   the same, then gpu-module-to-binary (PTX by
//                         default): one gpu.binary per gpu.module
//
// The last two are the GPU lowering's builders (LowerToPTX.h), which
// cmask-translate's artifacts go through.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_PIPELINES_PIPELINES_H
#define CMASK_PIPELINES_PIPELINES_H

#include "cmask/Conversion/Passes.h"

#include "mlir/Pass/PassManager.h"

namespace mlir::cmask {

/// cmask-derive-columns (when `columns`), cmask-lower-to-intervals and
/// convert-cmask-to-gpu with `options`.
void buildSpecToGPUPipeline(OpPassManager &pm, bool columns,
                            const ConvertCMaskToGPUPassOptions &options);

/// Registers cmask-spec-to-gpu, cmask-gpu-to-nvvm and cmask-gpu-to-binary.
void registerCMaskGPUPipelines();

} // namespace mlir::cmask

#endif // CMASK_PIPELINES_PIPELINES_H
