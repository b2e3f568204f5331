//===- cmask-opt.cpp - The cmask pass driver ------------------------------===//
//
// mlir-opt for MaskSpecs: parses the cmask dialect and runs its passes, the
// cmask-lower-to-intervals pipeline and convert-cmask-to-gpu. Registers only
// what it needs.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/Passes.h"
#include "cmask/InitCMask.h"
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
  // The preprocess and attention kernels in IR (convert-cmask-to-gpu) and
  // the dialects they are written in.
  mlir::cmask::registerCMaskConversionPasses();
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect,
                  mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                  mlir::NVVM::NVVMDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::vector::VectorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "cmask optimizer driver\n", registry));
}
