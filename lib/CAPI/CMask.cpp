//===- CMask.cpp - C API of the cmask dialect -----------------------------===//
//
// The C API (cmask-c/Dialect/CMask.h): the dialect handle and
// mlirRegisterCMaskPasses.
//
//===----------------------------------------------------------------------===//

#include "cmask-c/Dialect/CMask.h"

#include "cmask/InitCMask.h"

#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(CMask, cmask, mlir::cmask::CMaskDialect)

void mlirRegisterCMaskPasses(void) {
  mlir::cmask::registerCMaskPassesAndPipelines();
}
