//===- CMaskDialect.h - cmask dialect ---------------------------*- C++ -*-===//
//
// The cmask dialect class (CMaskDialect.td), its generated enums and
// attributes (CMaskAttrs.td) and types (CMaskTypes.td).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H
#define CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H

#include "mlir/IR/Dialect.h"

#include "cmask/Dialect/CMask/IR/CMaskDialect.h.inc"

#endif // CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H
