//===- Intervals.h - Interval slots of a DNF rule ---------------*- C++ -*-===//
//
// A slot is one visible-key interval [lo, hi) of a row, guarded by a row
// condition. Each DNF conjunct gives one slot.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_INTERVALS_H
#define CMASK_ANALYSIS_INTERVALS_H

#include "cmask/Analysis/Normalize.h"

namespace cmask {

/// A visible-key interval: when `cond` holds for the row, keys with
/// `lo <= j < hi` are visible (endpoints clamped to [0, k_len]).
struct Slot {
  const Pred *cond;
  const Expr *lo;
  const Expr *hi;

  bool operator==(const Slot &other) const {
    return cond == other.cond && lo == other.lo && hi == other.hi;
  }
  std::string str() const;
};

/// One slot per conjunct: the j-free atoms form the condition, the maximum
/// of the lower bounds (0 when none) and the minimum of the upper bounds
/// (k_len when none) the interval. Fails if an atom mentions j in any form
/// other than isJBound().
llvm::Expected<llvm::SmallVector<Slot, 4>> extractIntervals(ExprContext &ctx,
                                                            const DNF &dnf);

} // namespace cmask

#endif // CMASK_ANALYSIS_INTERVALS_H
