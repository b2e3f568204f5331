//===- Intervals.cpp - Interval slots of a DNF rule -----------------------===//
//
// Each conjunct `c1 and ... and j >= l1 and ... and j < u1 and ...` of a
// normalized rule is the slot [max(l...), min(u...)) under the row
// condition `c1 and ...`.
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Intervals.h"

#include "llvm/Support/raw_ostream.h"

using namespace cmask;

std::string Slot::str() const {
  return "[" + lo->str() + ", " + hi->str() + ") if " + cond->str();
}

llvm::Expected<llvm::SmallVector<Slot, 4>>
cmask::extractIntervals(ExprContext &ctx, const DNF &dnf) {
  llvm::SmallVector<Slot, 4> slots;
  for (const Conjunct &conjunct : dnf.conjuncts) {
    llvm::SmallVector<const Expr *, 4> lowers, uppers;
    llvm::SmallVector<const Pred *, 4> conds;
    for (const Pred *atom : conjunct) {
      if (isJBound(atom)) {
        (atom->getCmpKind() == CmpKind::GE ? lowers : uppers)
            .push_back(atom->getRHS());
        continue;
      }
      if (atom->dependsOnJ())
        return llvm::make_error<AnalysisError>(
            "atom `" + atom->str() +
                "` mentions j but is not a bound `j >= e` or `j < e`; run "
                "cmask-normalize-dnf first",
            ctx.getOrigin(atom));
      conds.push_back(atom);
    }
    slots.push_back(
        {ctx.getAnd(conds),
         lowers.empty() ? ctx.getConst(0) : ctx.getMax(lowers),
         uppers.empty() ? ctx.getVar(Var::KLen) : ctx.getMin(uppers)});
  }
  return slots;
}
