//===- InitCMask.h - Register cmask with an MLIR-based tool -----*- C++ -*-===//
//
// The C++ registration hook for compilers that embed cmask:
//
//   mlir::DialectRegistry registry;
//   mlir::cmask::registerCMaskDialect(registry);
//   mlir::cmask::registerCMaskPassesAndPipelines();
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_INITCMASK_H
#define CMASK_INITCMASK_H

#include "cmask/Dialect/CMask/IR/CMaskDialect.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

namespace mlir::cmask {

inline void registerCMaskDialect(DialectRegistry &registry) {
  registry.insert<CMaskDialect>();
}

/// Registers every cmask pass and pipeline with the global registry.
inline void registerCMaskPassesAndPipelines() {
  registerCMaskPasses();
  registerCMaskPipelines();
}

} // namespace mlir::cmask

#endif // CMASK_INITCMASK_H
