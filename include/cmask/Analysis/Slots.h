//===- Slots.h - Canonicalization of a region's slots -----------*- C++ -*-===//
//
// The last step of the lowering to slots (cmask-canonicalize-slots): the
// facts that hold in a region (domain, guard, earlier guards negated), and
// canonicalizeSlots, which uses the prover (Prover.h) to drop and merge
// slots without changing any row's visible set.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_SLOTS_H
#define CMASK_ANALYSIS_SLOTS_H

#include "cmask/Analysis/Intervals.h"

namespace cmask {

/// Facts that hold for every row that region `index` applies to: the domain
/// facts, the atoms of its guard when the guard is a conjunction, and the
/// atoms of the negation of every earlier guard whose negation (in NNF) is a
/// conjunction of comparisons.
llvm::SmallVector<const Pred *, 8>
regionFacts(ExprContext &ctx, llvm::ArrayRef<const Pred *> guards,
            unsigned index);

/// Drops slots that are provably empty, duplicated or contained in another
/// slot, and merges slots with the same condition whose intervals are
/// provably adjacent or overlapping for every row (so their union is an
/// interval); drops condition atoms the facts imply; simplifies min/max
/// endpoints the facts decide. The visible set of every row satisfying
/// `facts` is unchanged. At most `maxProofs` prover calls are made (the work
/// grows with the cube of the slot count); past that the remaining slots are
/// kept as they are and `*complete` is set to false: still exact, K maybe not
/// minimal.
llvm::SmallVector<Slot, 4> canonicalizeSlots(ExprContext &ctx,
                                             llvm::ArrayRef<Slot> slots,
                                             llvm::ArrayRef<const Pred *> facts,
                                             size_t maxProofs = 200000,
                                             bool *complete = nullptr);

} // namespace cmask

#endif // CMASK_ANALYSIS_SLOTS_H
