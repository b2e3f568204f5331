//===- MarkTensorMapArgs.cpp - cmask-mark-tensor-map-args -----------------===//
//
// The one step of the GPU lowering that the stock GPU-to-NVVM pipeline
// lacks: the kernel arguments listed in `cmask.tensor_map_args` become
// 128-byte by-value grid constants (`.param .align 64 .b8 [128]`), so the
// runtime passes CUtensorMaps as launch parameters and TMA reads them in
// parameter space (no per-call upload).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/Passes.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"
#include "cmask_runtime/KernelABI.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_MARKTENSORMAPARGSPASS
#include "cmask/Conversion/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;

/// The bytes of a CUtensorMap and its alignment, as the kernel ABI has them.
static constexpr int64_t kTensorMapBytes =
    ::cmask::abi::sizeOf(::cmask::abi::ArgKind::TensorMap);
static constexpr int64_t kTensorMapAlign =
    ::cmask::abi::alignOf(::cmask::abi::ArgKind::TensorMap);

namespace {
struct MarkTensorMapArgsPass
    : public mlir::cmask::impl::MarkTensorMapArgsPassBase<
          MarkTensorMapArgsPass> {
  using Base::Base;

  void runOnOperation() override {
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      auto indices =
          op->getAttrOfType<DenseI32ArrayAttr>(mlir::cmask::kTensorMapArgsAttr);
      if (!indices)
        return;
      auto func = dyn_cast<LLVM::LLVMFuncOp>(op);
      if (!func) {
        op->emitOpError() << "lists tensor-map arguments but is not an "
                             "llvm.func: run cmask-mark-tensor-map-args "
                             "after the GPU-to-NVVM conversion";
        failed = true;
        return;
      }
      Builder b(func.getContext());
      for (int32_t index : indices.asArrayRef()) {
        if (index < 0 ||
            index >= static_cast<int32_t>(func.getNumArguments()) ||
            !isa<LLVM::LLVMPointerType>(
                func.getFunctionType().getParamType(index))) {
          func.emitOpError() << "lists tensor-map argument " << index
                             << ", which is not a pointer argument";
          failed = true;
          return;
        }
        func.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(LLVM::LLVMArrayType::get(
                            b.getI8Type(), kTensorMapBytes)));
        func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(kTensorMapAlign));
        func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      func->removeAttr(mlir::cmask::kTensorMapArgsAttr);
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
