//===- LowerToPTX.cpp - gpu/nvgpu/nvvm to PTX -----------------------------===//
//
// The stages of mlir::gpu::buildLowerToNVVMPassPipeline (GPUToNVVMPipeline.cpp)
// split before gpu-module-to-binary so
// that tensor-map arguments can be made grid constants in between: the GPU
// conversion drops by-value argument attributes, and NVPTX copies a by-value
// argument whose address escapes to local memory unless it is a grid
// constant (TMA cannot read local memory).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
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

/// Tensor-map arguments become `ptr byval([128 x i8]) align 64` grid
/// constants.
static void markTensorMapArgs(ModuleOp module) {
  module.walk([](LLVM::LLVMFuncOp func) {
    auto indices =
        func->getAttrOfType<DenseI32ArrayAttr>(mlir::cmask::kTensorMapArgsAttr);
    if (!indices)
      return;
    Builder b(func.getContext());
    for (int32_t index : indices.asArrayRef()) {
      func.setArgAttr(
          index, LLVM::LLVMDialect::getByValAttrName(),
          TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
      func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                      b.getI64IntegerAttr(64));
      func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                      b.getUnitAttr());
    }
    func->removeAttr(mlir::cmask::kTensorMapArgsAttr);
  });
}

FailureOr<std::string>
mlir::cmask::lowerToPTX(ModuleOp module, llvm::StringRef chip, Location loc) {
  MLIRContext *context = module.getContext();
  PassManager toNVVM(context);
  // The preprocess kernels call item functions: inline them, drop the rest.
  toNVVM.addPass(createInlinerPass());
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createSymbolDCEPass());
  // buildCommonPassPipeline
  toNVVM.addPass(createConvertNVGPUToNVVMPass());
  toNVVM.addPass(createGpuKernelOutliningPass());
  toNVVM.addPass(createConvertVectorToSCFPass());
  toNVVM.addPass(createSCFToControlFlowPass());
  toNVVM.addPass(createConvertNVVMToLLVMPass());
  toNVVM.addPass(createConvertFuncToLLVMPass());
  toNVVM.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  target.features = "+ptx81"; // 8.1: red.global.add.v4.f32 (the backward)
  target.optLevel = 3;
  toNVVM.addPass(createGpuNVVMAttachTarget(target));
  toNVVM.addPass(createLowerAffinePass());
  toNVVM.addPass(createArithToLLVMConversionPass());
  toNVVM.addPass(createConvertIndexToLLVMPass());
  toNVVM.addPass(createCanonicalizerPass());
  toNVVM.addPass(createCSEPass());
  // buildGpuPassPipeline
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createStripDebugInfoPass());
  // Memref arguments (the preprocess) keep their descriptors; the attention
  // kernels take LLVM pointers and scalars only.
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  toNVVM.addNestedPass<gpu::GPUModuleOp>(
      LLVM::createNVVMOptimizeForTargetPass());
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  toNVVM.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());
  if (failed(toNVVM.run(module)))
    return emitError(loc) << "lowering the GPU kernels to NVVM failed";

  markTensorMapArgs(module);

  PassManager toBinary(context);
  GpuModuleToBinaryPassOptions binaryOptions;
  binaryOptions.compilationTarget = "isa";
  toBinary.addPass(createGpuModuleToBinaryPass(binaryOptions));
  if (failed(toBinary.run(module)))
    return emitError(loc) << "translating the GPU kernels to PTX failed";

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
