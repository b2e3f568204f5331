//===- Prover.h - Linear facts about row expressions ------------*- C++ -*-===//
//
// A small, sound and incomplete prover for `a <= b` over integer
// expressions, given facts that hold for every row of a region. Non-linear
// subterms (min, max, floordiv, metadata, ...) are treated as unknowns with
// the linear facts their definitions imply (min(a, b) <= a, C*(x floordiv C)
// <= x, isqrt(x) >= 0, ...). It refutes the negated goal by Fourier-Motzkin
// elimination with integer tightening, and gives up (answers "not proved")
// past a size budget.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_PROVER_H
#define CMASK_ANALYSIS_PROVER_H

#include "cmask/Analysis/Expr.h"

namespace cmask {

class Prover {
public:
  /// `facts` are predicates assumed true (non-comparison facts are ignored).
  Prover(ExprContext &ctx, llvm::ArrayRef<const Pred *> facts);

  /// True if `a <= b` holds whenever the facts and `extra` hold.
  bool proveLE(const Expr *a, const Expr *b,
               llvm::ArrayRef<const Pred *> extra = {});
  /// True if `a < b` holds whenever the facts and `extra` hold.
  bool proveLT(const Expr *a, const Expr *b,
               llvm::ArrayRef<const Pred *> extra = {});
  /// True if the facts and `extra` cannot all hold.
  bool proveInfeasible(llvm::ArrayRef<const Pred *> extra);

  /// The facts that hold for every row of any region: 0 <= i < q_len,
  /// 0 <= b, 0 <= k_len.
  static llvm::SmallVector<const Pred *, 4> domainFacts(ExprContext &ctx);

private:
  ExprContext &ctx;
  llvm::SmallVector<const Pred *, 8> facts;
};

} // namespace cmask

#endif // CMASK_ANALYSIS_PROVER_H
