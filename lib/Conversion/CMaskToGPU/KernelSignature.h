//===- KernelSignature.h - Kernel signatures from the ABI lists -*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: the MLIR types of the arguments
// that cmask_runtime/KernelABI.h lists, and the kernels built from them, so
// that every builder emits its signature from the one definition the
// runtime packs its launches from.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_KERNELSIGNATURE_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_KERNELSIGNATURE_H

#include "cmask_runtime/KernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::cmask {

/// The type of an argument of `kind`: pointers and tensor maps are
/// `!llvm.ptr` (a tensor map becomes a by-value grid constant when the
/// kernel is lowered: cmask-mark-tensor-map-args), buffers
/// `memref<?xi32>`, counts `index`.
Type getABIType(Builder &b, ::cmask::abi::ArgKind kind);

/// The types of `args`, in order.
llvm::SmallVector<Type>
getABITypes(Builder &b, llvm::ArrayRef<::cmask::abi::NamedArg> args);

/// A `gpu.func` kernel `name` at `b`'s insertion point, taking the
/// arguments of `signature`, for `threads` threads per block (and at least
/// `minBlocks` resident per SM when given); its tensor-map arguments are
/// listed in `cmask.tensor_map_args`. The body is an empty entry block.
gpu::GPUFuncOp createKernel(OpBuilder &b, Location loc, llvm::StringRef name,
                            const ::cmask::abi::Signature &signature,
                            int32_t threads,
                            std::optional<int32_t> minBlocks = std::nullopt);

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_KERNELSIGNATURE_H
