//===- cmask-opt.cpp - The cmask pass driver ------------------------------===//
//
// mlir-opt for MaskSpecs: parses the cmask dialect and runs its passes and
// pipelines: cmask-lower-to-intervals, convert-cmask-to-gpu,
// cmask-mark-tensor-map-args, cmask-derive-columns, and the GPU pipelines
// cmask-spec-to-gpu, cmask-gpu-to-nvvm and cmask-gpu-to-binary
// (cmask/Pipelines/Pipelines.h).
// Registers only what it needs.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"
#include "cmask/Conversion/Passes.h"
#include "cmask/InitCMask.h"
#include "cmask/Pipelines/Pipelines.h"
#include "cmask/Target/Passes.h"
#include "cmask/Tools/ToolArgs.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  std::vector<char *> args = mlir::cmask::withQuietDiagnostics(argc, argv);
  argc = static_cast<int>(args.size());
  argv = args.data();
  mlir::DialectRegistry registry;
  mlir::cmask::registerCMaskDialect(registry);
  mlir::cmask::registerCMaskPassesAndPipelines();
  // The preprocess and attention kernels in IR (convert-cmask-to-gpu), their
  // lowering to NVVM and PTX, and the dialects and translations these use.
  mlir::cmask::registerCMaskConversionPasses();
  mlir::cmask::registerCMaskTargetPasses();
  mlir::cmask::registerCMaskGPUPipelines();
  mlir::cmask::registerGPULowering(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "cmask optimizer driver\n", registry));
}
