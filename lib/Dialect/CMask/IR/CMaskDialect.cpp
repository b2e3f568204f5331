//===- CMaskDialect.cpp - cmask dialect registration ----------------------===//
//
// Registers the dialect's operations, attributes and types.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/IR/CMaskDialect.h"

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cmask;

#include "cmask/Dialect/CMask/IR/CMaskDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "cmask/Dialect/CMask/IR/CMaskTypes.cpp.inc"

void CMaskDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cmask/Dialect/CMask/IR/CMaskOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "cmask/Dialect/CMask/IR/CMaskTypes.cpp.inc"
      >();
}
