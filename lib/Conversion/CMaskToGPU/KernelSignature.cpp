//===- KernelSignature.cpp - Kernel signatures from the ABI lists ---------===//
//
// Kernel signatures from the kernel ABI's argument lists
// (cmask_runtime/KernelABI.h): each ABI kind as an MLIR type, and
// createKernel, which builds a gpu.func with exactly those arguments.
//
//===----------------------------------------------------------------------===//

#include "KernelSignature.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::cmask;
using ::cmask::abi::ArgKind;

Type mlir::cmask::getABIType(Builder &b, ArgKind kind) {
  switch (kind) {
  case ArgKind::Pointer:
  case ArgKind::TensorMap:
    return LLVM::LLVMPointerType::get(b.getContext());
  case ArgKind::I32:
    return b.getI32Type();
  case ArgKind::I64:
    return b.getI64Type();
  case ArgKind::F32:
    return b.getF32Type();
  case ArgKind::Index:
    return b.getIndexType();
  case ArgKind::Buffer:
    return MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
  }
  llvm_unreachable("unknown argument kind");
}

llvm::SmallVector<Type>
mlir::cmask::getABITypes(Builder &b,
                         llvm::ArrayRef<::cmask::abi::NamedArg> args) {
  llvm::SmallVector<Type> types;
  for (const ::cmask::abi::NamedArg &arg : args)
    types.push_back(getABIType(b, arg.kind));
  return types;
}

gpu::GPUFuncOp
mlir::cmask::createKernel(OpBuilder &b, Location loc, llvm::StringRef name,
                          const ::cmask::abi::Signature &signature,
                          int32_t threads, std::optional<int32_t> minBlocks) {
  llvm::SmallVector<Type> types;
  llvm::SmallVector<int32_t> tensorMaps;
  for (int k = 0; k < signature.size; ++k) {
    types.push_back(getABIType(b, signature.args[k].kind));
    if (signature.args[k].kind == ArgKind::TensorMap)
      tensorMaps.push_back(k);
  }
  auto func =
      gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
  if (minBlocks)
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(*minBlocks));
  if (!tensorMaps.empty())
    func->setAttr(kTensorMapArgsAttr, b.getDenseI32ArrayAttr(tensorMaps));
  return func;
}
