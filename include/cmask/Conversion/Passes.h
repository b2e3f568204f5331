//===- Passes.h - cmask conversion passes -----------------------*- C++ -*-===//
//
// The conversion passes (Passes.td): convert-cmask-to-gpu and
// cmask-mark-tensor-map-args, with the dialects their output uses.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_PASSES_H
#define CMASK_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::cmask {

#define GEN_PASS_DECL
#include "cmask/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cmask/Conversion/Passes.h.inc"

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_PASSES_H
