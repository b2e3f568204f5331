//===- Normalize.h - NNF, j isolation and DNF of a rule ---------*- C++ -*-===//
//
// Turns a rule into a disjunction of conjunctions whose atoms are either
// free of `j` or one of the two bound forms `j >= e` and `j < e` (e free of
// j). Every rewrite is exact: nothing is approximated.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_NORMALIZE_H
#define CMASK_ANALYSIS_NORMALIZE_H

#include "cmask/Analysis/Expr.h"

#include "llvm/Support/Error.h"

namespace cmask {

/// An error of the analysis, pointing at the origin of the offending atom
/// (see ExprContext::setOrigin); origin may be null.
class AnalysisError : public llvm::ErrorInfo<AnalysisError> {
public:
  static char ID;
  AnalysisError(std::string message, const void *origin)
      : message(std::move(message)), origin(origin) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
  const std::string &getMessage() const { return message; }
  const void *getOrigin() const { return origin; }

private:
  std::string message;
  const void *origin;
};

/// A conjunction of atoms.
using Conjunct = llvm::SmallVector<const Pred *, 4>;

/// A disjunction of conjunctions; no conjuncts means `false`, one empty
/// conjunct means `true`.
struct DNF {
  llvm::SmallVector<Conjunct, 4> conjuncts;
};

struct NormalizeOptions {
  /// Fail instead of building a DNF with more conjuncts than this.
  size_t maxConjuncts = 4096;
  /// Fail instead of unrolling unions into more than this many atoms: the
  /// normalization of that many takes about 2 s and 300 MB (docs/MaskSpec.md,
  /// Limits).
  size_t maxUnrolledAtoms = 1 << 18;
};

/// Unrolls every bounded union into a disjunction of its copies.
llvm::Expected<const Pred *> unrollUnions(ExprContext &ctx, const Pred *pred,
                                          const NormalizeOptions &options = {});

/// Negation normal form: pushes `not` into comparisons. Requires no unions.
const Pred *toNNF(ExprContext &ctx, const Pred *pred);

/// True if `atom` is `j >= e` or `j < e` with `e` free of j.
bool isJBound(const Pred *atom);

/// Rewrites one comparison that mentions `j` into an exact combination of
/// j bounds (`j >= e`, `j < e`) and j-free atoms. Fails with a message
/// saying why `j` cannot be isolated.
llvm::Expected<const Pred *> isolateJ(ExprContext &ctx, const Pred *cmp);

/// Applies isolateJ to every atom of an NNF predicate.
llvm::Expected<const Pred *> isolateAll(ExprContext &ctx, const Pred *nnf);

/// Distributes an NNF predicate into DNF; fails when the result would have
/// more than options.maxConjuncts conjuncts. Conjuncts are deduplicated,
/// contradictory ones (containing `false`) dropped.
llvm::Expected<DNF> toDNF(ExprContext &ctx, const Pred *nnf,
                          const NormalizeOptions &options = {});

/// The whole normalization: unroll, NNF, isolate, DNF.
llvm::Expected<DNF> normalizeRule(ExprContext &ctx, const Pred *rule,
                                  const NormalizeOptions &options = {});

/// The predicate `or(and(...), ...)` of a DNF.
const Pred *toPred(ExprContext &ctx, const DNF &dnf);

/// Reads a predicate in DNF form (an `or` of `and`s of atoms, or a single
/// `and`/atom/constant) back into a DNF. Fails if it is not in that form.
llvm::Expected<DNF> fromPred(ExprContext &ctx, const Pred *pred);

} // namespace cmask

#endif // CMASK_ANALYSIS_NORMALIZE_H
