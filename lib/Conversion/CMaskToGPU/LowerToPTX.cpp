//===- LowerToPTX.cpp - gpu/nvgpu/nvvm to PTX -----------------------------===//
//
// The GPU lowering: what it needs registered (dialects, translations, the
// convert-to-LLVM interfaces); the pipelines cmask-gpu-to-nvvm and
// cmask-gpu-to-binary, i.e. the stock mlir::gpu::buildLowerToNVVMPassPipeline
// (GPUToNVVMPipeline.cpp) with the inliner first and
// cmask-mark-tensor-map-args last; and lowerToPTX, which runs the second on
// one module and returns its PTX.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

#include "cmask/Conversion/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/InlinerInterfaceImpl.h"
#include "mlir/Dialect/LLVMIR/Transforms/OptimizeForNVVM.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::cmask::registerGPULowering(DialectRegistry &registry) {
  registry
      .insert<arith::ArithDialect, func::FuncDialect, gpu::GPUDialect,
              memref::MemRefDialect, scf::SCFDialect, LLVM::LLVMDialect,
              NVVM::NVVMDialect, nvgpu::NVGPUDialect, vector::VectorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  // The preprocess's stage kernels call item functions: let the inliner see
  // into func (and the LLVM ops among them, e.g. inline asm).
  func::registerInlinerExtension(registry);
  LLVM::registerInlinerInterface(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // The "convert to LLVM" interfaces the NVVM lowering looks for.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
}

void mlir::cmask::buildGPUToNVVMPipeline(OpPassManager &pm,
                                         const GPUTarget &target) {
  // The preprocess kernels call item functions: inline them, drop the rest.
  pm.addPass(createInlinerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createSymbolDCEPass());
  // buildCommonPassPipeline
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions attach;
  attach.chip = target.chip;
  attach.features = target.features;
  attach.optLevel = target.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // buildGpuPassPipeline
  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  gpu.addPass(createStripDebugInfoPass());
  // Memref arguments (the preprocess) keep their descriptors; the attention
  // kernels take LLVM pointers and scalars only.
  gpu.addPass(createConvertGpuOpsToNVVMOps());
  gpu.addPass(LLVM::createNVVMOptimizeForTargetPass());
  gpu.addPass(createCanonicalizerPass());
  gpu.addPass(createCSEPass());
  gpu.addPass(createReconcileUnrealizedCastsPass());
  // What the stock pipeline lacks: TMA descriptors as grid constants.
  gpu.addPass(createMarkTensorMapArgsPass());
}

void mlir::cmask::buildGPUToBinaryPipeline(OpPassManager &pm,
                                           const GPUTarget &target,
                                           llvm::StringRef format) {
  buildGPUToNVVMPipeline(pm, target);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

FailureOr<std::string>
mlir::cmask::lowerToPTX(ModuleOp module, llvm::StringRef chip, Location loc) {
  PassManager pm(module.getContext());
  GPUTarget target;
  target.chip = chip.str();
  buildGPUToBinaryPipeline(pm, target, "isa");
  if (failed(pm.run(module)))
    return emitError(loc) << "lowering the GPU kernels to PTX failed";

  std::string ptx;
  int binaries = 0;
  module.walk([&](gpu::BinaryOp binary) {
    ++binaries;
    for (Attribute object : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (binaries != 1 || ptx.empty())
    return emitError(loc) << "expected the PTX of one gpu.module, got "
                          << binaries;
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  return ptx;
}
