//===- Passes.h - cmask target passes ---------------------------*- C++ -*-===//
//
// cmask-derive-columns (Passes.td): the column direction of every spec, as
// deriveColumns (Columns.h) decides it.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_PASSES_H
#define CMASK_TARGET_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::cmask {

#define GEN_PASS_DECL
#include "cmask/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cmask/Target/Passes.h.inc"

} // namespace mlir::cmask

#endif // CMASK_TARGET_PASSES_H
