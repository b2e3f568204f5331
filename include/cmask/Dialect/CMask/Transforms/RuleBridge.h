//===- RuleBridge.h - MLIR rules <-> Analysis predicates --------*- C++ -*-===//
//
// The passes are thin wrappers: they import a region's guard or rule into
// the Analysis library's expressions (cmask/Analysis), transform them there,
// and export the result back as cmask ops. Imported comparisons carry their
// defining Operation* as origin, so analysis errors point at user source.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_TRANSFORMS_RULEBRIDGE_H
#define CMASK_DIALECT_CMASK_TRANSFORMS_RULEBRIDGE_H

#include "cmask/Analysis/Intervals.h"
#include "cmask/Dialect/CMask/IR/CMaskOps.h"

namespace mlir::cmask {

/// The predicate yielded by a guard or rule that ends in cmask.yield.
const ::cmask::Pred *importPredicate(::cmask::ExprContext &ctx, Region &region);

/// The slots of a rule that ends in cmask.slots.
llvm::SmallVector<::cmask::Slot, 4> importSlots(::cmask::ExprContext &ctx,
                                                Region &region);

/// Replaces the body of `rule` by ops yielding `or(and(atoms)...)`.
void exportDNF(Region &rule, const ::cmask::DNF &dnf, Location loc);

/// Replaces the body of `rule` by the slots, ending in cmask.slots.
void exportSlots(Region &rule, llvm::ArrayRef<::cmask::Slot> slots,
                 Location loc);

/// Reports an analysis error at the operation it originates from (or at
/// `fallback`), consuming the error.
InFlightDiagnostic emitAnalysisError(llvm::Error error, Operation *fallback);

} // namespace mlir::cmask

#endif // CMASK_DIALECT_CMASK_TRANSFORMS_RULEBRIDGE_H
