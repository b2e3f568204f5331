//===- Slots.cpp - Canonicalization of a region's slots -------------------===//
//
// Atoms of a slot's condition that the region's facts imply are dropped.
// Endpoints are compared after clamping to [0, k_len], which is what the
// descriptor stores, so a bound that is provably <= 0 (or >= k_len) is as
// good as 0 (or k_len). Every rewrite keeps each row's visible set:
//  * a slot that is provably empty is dropped;
//  * slot A is dropped when B's condition is a subset of A's atoms and
//    clamp(lo_B) <= clamp(lo_A), clamp(hi_A) <= clamp(hi_B);
//  * slots with the same condition and clamp(a1) <= clamp(a2) <= clamp(b1)
//    are one interval [a1, max(b1, b2)); equal lower (upper) bounds always
//    merge into [a, max(b1, b2)) ([min(a1, a2), b)).
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Slots.h"

#include "cmask/Analysis/Prover.h"

#include "llvm/ADT/STLExtras.h"

#include <optional>

using namespace cmask;

llvm::SmallVector<const Pred *, 8>
cmask::regionFacts(ExprContext &ctx, llvm::ArrayRef<const Pred *> guards,
                   unsigned index) {
  llvm::SmallVector<const Pred *, 8> facts;
  for (const Pred *f : Prover::domainFacts(ctx))
    facts.push_back(f);
  auto addConjunction = [&](const Pred *p) {
    auto unrolled = unrollUnions(ctx, p);
    if (!unrolled) {
      llvm::consumeError(unrolled.takeError());
      return;
    }
    const Pred *nnf = toNNF(ctx, *unrolled);
    llvm::ArrayRef<const Pred *> atoms(nnf);
    if (nnf->getKind() == PredKind::And)
      atoms = nnf->getOperands();
    for (const Pred *atom : atoms)
      if (atom->getKind() == PredKind::Cmp)
        facts.push_back(atom);
  };
  for (unsigned k = 0; k < index; ++k)
    addConjunction(ctx.getNot(guards[k]));
  addConjunction(guards[index]);
  return facts;
}

namespace {
class Canonicalizer {
public:
  Canonicalizer(ExprContext &ctx, llvm::ArrayRef<const Pred *> facts,
                size_t maxProofs)
      : ctx(ctx), prover(ctx, facts), zero(ctx.getConst(0)),
        kLen(ctx.getVar(Var::KLen)), budget(maxProofs) {}

  /// False once the proof budget ran out (the result is exact, maybe not
  /// minimal).
  bool isComplete() const { return proofs <= budget; }

  llvm::SmallVector<Slot, 4> run(llvm::ArrayRef<Slot> input) {
    llvm::SmallVector<Slot, 4> slots;
    for (const Slot &s : input) {
      if (isEmpty(s))
        continue;
      Slot simple = simplify(s);
      if (!llvm::is_contained(slots, simple))
        slots.push_back(simple);
    }
    bool changed = true;
    while (changed && isComplete()) {
      changed = false;
      for (size_t a = 0; a < slots.size() && !changed; ++a)
        for (size_t b = 0; b < slots.size() && !changed; ++b) {
          if (a == b)
            continue;
          if (contains(slots[b], slots[a])) {
            slots.erase(slots.begin() + a);
            changed = true;
          } else if (auto merged = merge(slots[a], slots[b])) {
            slots[a] = simplify(*merged);
            slots.erase(slots.begin() + b);
            changed = true;
          }
        }
    }
    return slots;
  }

private:
  /// The prover's answers within the budget; "not proved" past it.
  bool proveLE(const Expr *a, const Expr *b,
               llvm::ArrayRef<const Pred *> extra) {
    return ++proofs <= budget && prover.proveLE(a, b, extra);
  }
  bool proveLT(const Expr *a, const Expr *b,
               llvm::ArrayRef<const Pred *> extra) {
    return ++proofs <= budget && prover.proveLT(a, b, extra);
  }
  bool proveInfeasible(llvm::ArrayRef<const Pred *> extra) {
    return ++proofs <= budget && prover.proveInfeasible(extra);
  }

  static llvm::ArrayRef<const Pred *> atoms(const Slot &s) {
    if (s.cond->isTrue())
      return {};
    if (s.cond->getKind() == PredKind::And)
      return s.cond->getOperands();
    return llvm::ArrayRef<const Pred *>(s.cond);
  }

  /// clamp(a) <= clamp(b) for rows satisfying `extra`.
  bool clampedLE(const Expr *a, const Expr *b,
                 llvm::ArrayRef<const Pred *> extra) {
    return proveLE(a, b, extra) || proveLE(a, zero, extra) ||
           proveLE(kLen, b, extra);
  }

  bool isEmpty(const Slot &s) {
    if (s.cond->isFalse())
      return true;
    auto extra = atoms(s);
    return proveInfeasible(extra) || clampedLE(s.hi, s.lo, extra);
  }

  /// Drops the operands of a min/max endpoint that cannot decide its
  /// clamped value.
  const Expr *simplifyBound(const Expr *e, bool isLower,
                            llvm::ArrayRef<const Pred *> extra) {
    if (isLower && proveLE(e, zero, extra))
      return zero;
    if (!isLower && proveLE(kLen, e, extra))
      return kLen;
    ExprKind kind = e->getKind();
    if (kind != ExprKind::Min && kind != ExprKind::Max)
      return e;
    bool isMax = kind == ExprKind::Max;
    llvm::SmallVector<const Expr *, 4> ops(e->getOperands());
    for (size_t k = 0; k < ops.size() && ops.size() > 1;) {
      const Expr *op = ops[k];
      // An operand dominated by another never decides the min/max; one on
      // the far side of the clamp range does not change the clamped value.
      bool useless = llvm::any_of(ops, [&](const Expr *other) {
        return other != op &&
               (isMax ? proveLE(op, other, extra) : proveLE(other, op, extra));
      });
      if (isMax && isLower)
        useless |= proveLE(op, zero, extra);
      if (!isMax && !isLower)
        useless |= proveLE(kLen, op, extra);
      if (useless)
        ops.erase(ops.begin() + k);
      else
        ++k;
    }
    return isMax ? ctx.getMax(ops) : ctx.getMin(ops);
  }

  /// True if `atom` follows from the facts and `extra`.
  bool implied(const Pred *atom, llvm::ArrayRef<const Pred *> extra) {
    const Expr *a = atom->getLHS(), *b = atom->getRHS();
    switch (atom->getCmpKind()) {
    case CmpKind::LE:
      return proveLE(a, b, extra);
    case CmpKind::LT:
      return proveLT(a, b, extra);
    case CmpKind::GE:
      return proveLE(b, a, extra);
    case CmpKind::GT:
      return proveLT(b, a, extra);
    case CmpKind::EQ:
      return proveLE(a, b, extra) && proveLE(b, a, extra);
    case CmpKind::NE:
      return false;
    }
    return false;
  }

  /// Drops the condition's atoms that the facts and its other atoms imply,
  /// then simplifies the endpoints under what remains.
  Slot simplify(const Slot &s) {
    llvm::SmallVector<const Pred *, 4> kept(atoms(s));
    for (size_t k = 0; k < kept.size();) {
      llvm::SmallVector<const Pred *, 4> others(kept);
      others.erase(others.begin() + k);
      if (kept[k]->getKind() == PredKind::Cmp && implied(kept[k], others))
        kept = std::move(others);
      else
        ++k;
    }
    const Pred *cond = ctx.getAnd(kept);
    return {cond, simplifyBound(s.lo, true, kept),
            simplifyBound(s.hi, false, kept)};
  }

  /// True if every key `inner` shows is shown by `outer`.
  bool contains(const Slot &outer, const Slot &inner) {
    auto innerAtoms = atoms(inner);
    for (const Pred *atom : atoms(outer))
      if (!llvm::is_contained(innerAtoms, atom))
        return false;
    return clampedLE(outer.lo, inner.lo, innerAtoms) &&
           clampedLE(inner.hi, outer.hi, innerAtoms);
  }

  /// The single slot equal to the union of `x` and `y`, if provable.
  std::optional<Slot> merge(const Slot &x, const Slot &y) {
    if (x.cond != y.cond)
      return std::nullopt;
    if (x.lo == y.lo)
      return Slot{x.cond, x.lo, ctx.getMax(x.hi, y.hi)};
    if (x.hi == y.hi)
      return Slot{x.cond, ctx.getMin(x.lo, y.lo), x.hi};
    auto extra = atoms(x);
    // x starts first and y starts inside x (or right at its end).
    if (clampedLE(x.lo, y.lo, extra) && clampedLE(y.lo, x.hi, extra))
      return Slot{x.cond, x.lo, ctx.getMax(x.hi, y.hi)};
    return std::nullopt;
  }

  ExprContext &ctx;
  Prover prover;
  const Expr *zero;
  const Expr *kLen;
  size_t budget;
  size_t proofs = 0;
};
} // namespace

llvm::SmallVector<Slot, 4>
cmask::canonicalizeSlots(ExprContext &ctx, llvm::ArrayRef<Slot> slots,
                         llvm::ArrayRef<const Pred *> facts, size_t maxProofs,
                         bool *complete) {
  Canonicalizer canonicalizer(ctx, facts, maxProofs);
  llvm::SmallVector<Slot, 4> result = canonicalizer.run(slots);
  if (complete)
    *complete = canonicalizer.isComplete();
  return result;
}
