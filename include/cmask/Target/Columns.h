//===- Columns.h - Derive the column direction of a MaskSpec ----*- C++ -*-===//
//
// The backward pass needs, per key column, the query rows that see it
// (docs/descriptor.md, "Column direction"). deriveColumns decides how a
// spec gets it:
//   derived    the transposed spec (buildTransposedSpec) lowers to slots;
//   symmetric  it does not, but the spec declares `symmetric` (checked
//              here on random small metadata): the columns are the rows;
//   rows       neither: no column descriptor; the backward checks the
//              row intervals (still exact, slower).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_COLUMNS_H
#define CMASK_TARGET_COLUMNS_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir::cmask {

enum class ColumnMode { Derived, Symmetric, Rows };
llvm::StringRef stringifyColumnMode(ColumnMode mode);

struct ColumnDirection {
  ColumnMode mode = ColumnMode::Rows;
  /// Why the transposed rule could not be lowered (symmetric and rows).
  std::string reason;
  /// The column spec `<spec>__columns` in slot form, in the module given to
  /// deriveColumns (derived and symmetric; null for rows).
  SpecOp spec;
};

/// Derives the column direction of `source` (in rule form) and, unless the
/// mode is rows, appends its lowered column spec to `into`. Fails (with an
/// error at `source`) only when a `symmetric` claim is refuted.
FailureOr<ColumnDirection> deriveColumns(SpecOp source, ModuleOp into);

/// A spec compiled for the preprocess: a copy lowered to slots and its
/// column direction, both in `module`.
struct CompiledSpec {
  OwningOpRef<ModuleOp> module;
  SpecOp rows;
  ColumnDirection columns;
  /// The preprocess parts: the rows with `shapes`, and the column spec with
  /// `columnShapes` unless the column mode is rows.
  llvm::SmallVector<PreprocessPart> parts;
};
FailureOr<CompiledSpec> compileSpec(SpecOp source,
                                    llvm::ArrayRef<TileShape> shapes,
                                    llvm::ArrayRef<TileShape> columnShapes);

/// Checks `symmetric` on random small batches: row i sees key j exactly
/// when, with q_len and k_len swapped, row j sees key i. Emits an error with
/// the counterexample at `spec` (in rule form) when it finds one.
LogicalResult checkSymmetry(SpecOp spec);

} // namespace mlir::cmask

#endif // CMASK_TARGET_COLUMNS_H
