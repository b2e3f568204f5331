//===- CMaskOps.h - cmask operations ----------------------------*- C++ -*-===//
//
// The cmask operations (CMaskOps.td): spec, metadata, region, the
// expression and predicate ops, union and the slot form (slot, slots).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKOPS_H
#define CMASK_DIALECT_CMASK_IR_CMASKOPS_H

#include "cmask/Dialect/CMask/IR/CMaskDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cmask/Dialect/CMask/IR/CMaskEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "cmask/Dialect/CMask/IR/CMaskTypes.h.inc"

#define GET_OP_CLASSES
#include "cmask/Dialect/CMask/IR/CMaskOps.h.inc"

#endif // CMASK_DIALECT_CMASK_IR_CMASKOPS_H
