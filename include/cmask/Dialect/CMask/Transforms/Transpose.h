//===- Transpose.h - The column direction of a MaskSpec ---------*- C++ -*-===//
//
// The backward pass walks key columns: it needs, for every key `j`, the
// query rows that see it. buildTransposedSpec writes that as a MaskSpec of
// its own, so that the whole row pipeline (normalization, isolation, slots,
// the preprocess) derives the column direction unchanged.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_TRANSFORMS_TRANSPOSE_H
#define CMASK_DIALECT_CMASK_TRANSFORMS_TRANSPOSE_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

namespace mlir::cmask {

/// Inserts after `spec` (in rule form) the spec `name` of its column
/// direction: the same metadata and one region, guard `true`, whose rule is
///   or over regions r of (guard_r and not guard_s for s < r and rule_r)
/// with `i` and `j`, and `q_len` and `k_len`, exchanged. Its row `i'` is the
/// key column `i' = j` of `spec`, its key `j'` the query row: row `i'` of the
/// transposed spec sees key `j'` exactly when row `j'` of `spec` sees key
/// `i'`. Fails (with an error at `spec`) when `spec` is in slot form.
FailureOr<SpecOp> buildTransposedSpec(SpecOp spec, llvm::StringRef name);

/// The name of the column-direction spec of `spec`: `<spec>__columns`.
std::string getColumnSpecName(SpecOp spec);

} // namespace mlir::cmask

#endif // CMASK_DIALECT_CMASK_TRANSFORMS_TRANSPOSE_H
