//===- Preprocess.h - The mask-specific preprocess in scf form --*- C++ -*-===//
//
// Builds the preprocess of a MaskSpec (in slot form) as plain functions over
// memrefs (func/scf/arith/memref/math): one function per phase computing one
// work item, and a host wrapper per phase that loops over the items. The
// same item functions are lowered to the CPU (the host twin, run by the
// tests through the ExecutionEngine) and wrapped in GPU kernels.
//
// ABI of the row phase (docs/descriptor.md):
//   @cmask_<spec>_rows(%n_rows: index, %num_seqs: i32,
//                      %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>,
//                      <metadata in declaration order>,
//                      %intervals: memref<?xi32>)
// where a scalar is an i32, a per-sequence value a memref<?xi32> [B], and
// offsets two memref<?xi32>: the values and their per-sequence starts [B+1].
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H
#define CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::cmask {

/// The names of the functions buildPreprocess creates for a spec.
struct PreprocessNames {
  std::string rowItem; ///< one packed row: its K slots
  std::string rows;    ///< host wrapper: every row
};
PreprocessNames getPreprocessNames(SpecOp spec);

/// Adds the preprocess functions of `spec` to `module`. The spec must be in
/// slot form (after cmask-lower-to-intervals). The host wrappers carry
/// `llvm.emit_c_interface`.
LogicalResult buildPreprocess(SpecOp spec, ModuleOp module);

/// Lowers a module built by buildPreprocess to the LLVM dialect for the CPU.
LogicalResult lowerPreprocessToLLVM(ModuleOp module);

} // namespace mlir::cmask

#endif // CMASK_CONVERSION_CMASKTOGPU_PREPROCESS_H
