//===- Slots.h - Canonicalization of a region's slots -----------*- C++ -*-===//

#ifndef CMASK_ANALYSIS_SLOTS_H
#define CMASK_ANALYSIS_SLOTS_H

#include "cmask/Analysis/Intervals.h"

namespace cmask {

/// Facts that hold for every row that region `index` applies to: the domain
/// facts, the atoms of its guard when the guard is a conjunction, and the
/// negation of every earlier guard that is a single comparison.
llvm::SmallVector<const Pred *, 8>
regionFacts(ExprContext &ctx, llvm::ArrayRef<const Pred *> guards,
            unsigned index);

/// Drops slots that are provably empty, duplicated or contained in another
/// slot, and merges slots with the same condition whose intervals are
/// provably adjacent or overlapping for every row (so their union is an
/// interval); simplifies min/max endpoints the facts decide. The visible set
/// of every row satisfying `facts` is unchanged.
llvm::SmallVector<Slot, 4> canonicalizeSlots(ExprContext &ctx,
                                             llvm::ArrayRef<Slot> slots,
                                             llvm::ArrayRef<const Pred *> facts);

} // namespace cmask

#endif // CMASK_ANALYSIS_SLOTS_H
