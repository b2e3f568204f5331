/*===- CMask.h - C API of the cmask dialect -----------------------*- C -*-===*\
|*                                                                            *|
|* For MLIR-based compilers that embed cmask through the C API:              *|
|*   MlirDialectHandle h = mlirGetDialectHandle__cmask__();                   *|
|*   mlirDialectHandleRegisterDialect(h, ctx);                                *|
|*   mlirRegisterCMaskPasses();                                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CMASK_C_DIALECT_CMASK_H
#define CMASK_C_DIALECT_CMASK_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(CMask, cmask);

/// Registers the cmask passes and the cmask-lower-to-intervals pipeline with
/// the global pass registry (so textual pipelines can name them).
MLIR_CAPI_EXPORTED void mlirRegisterCMaskPasses(void);

#ifdef __cplusplus
}
#endif

#endif // CMASK_C_DIALECT_CMASK_H
