//===- CMaskDialect.h - cmask dialect ---------------------------*- C++ -*-===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H
#define CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H

#include "mlir/IR/Dialect.h"

#include "cmask/Dialect/CMask/IR/CMaskDialect.h.inc"

#endif // CMASK_DIALECT_CMASK_IR_CMASKDIALECT_H
