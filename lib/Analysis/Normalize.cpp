//===- Normalize.cpp - NNF, j isolation and DNF of a rule -----------------===//
//
// The exact rewrites that bring a rule into the form the interval
// extraction reads: unions unrolled, negations pushed into comparisons,
// every atom that mentions j turned into bounds `j >= e` / `j < e`, and the
// whole distributed into a disjunction of conjunctions.
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Normalize.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>

using namespace cmask;

char AnalysisError::ID = 0;

void AnalysisError::log(llvm::raw_ostream &os) const { os << message; }

std::error_code AnalysisError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

static llvm::Error fail(const void *origin, const llvm::Twine &message) {
  return llvm::make_error<AnalysisError>(message.str(), origin);
}

//===----------------------------------------------------------------------===//
// Unions
//===----------------------------------------------------------------------===//

namespace {
struct Unroller {
  Unroller(ExprContext &ctx, const NormalizeOptions &options)
      : ctx(ctx), options(options) {}

  ExprContext &ctx;
  const NormalizeOptions &options;
  /// Atoms the unrolled unions produce, counted against
  /// options.maxUnrolledAtoms.
  size_t atoms = 0;
  /// How many unions enclose the predicate being unrolled.
  unsigned unionDepth = 0;
  llvm::DenseMap<const Pred *, size_t> sizes;

  /// The number of comparisons of `p` once its unions are unrolled, as a
  /// tree (saturating); computed without building anything.
  size_t unrolledSize(const Pred *p) {
    constexpr size_t kSaturated = SIZE_MAX / 2;
    if (p->getKind() == PredKind::Cmp)
      return 1;
    if (auto it = sizes.find(p); it != sizes.end())
      return it->second;
    size_t n = 0;
    if (p->getKind() == PredKind::Any) {
      uint64_t span = static_cast<uint64_t>(p->getUpper()) -
                      static_cast<uint64_t>(p->getLower());
      size_t body = unrolledSize(p->getBody());
      n = span >= kSaturated || (body != 0 && span + 1 > kSaturated / body)
              ? kSaturated
              : (span + 1) * body;
    } else {
      for (const Pred *op : p->getOperands())
        n = std::min(n + unrolledSize(op), kSaturated);
    }
    sizes[p] = n;
    return n;
  }

  llvm::Expected<const Pred *> run(const Pred *p) {
    switch (p->getKind()) {
    case PredKind::True:
    case PredKind::False:
    case PredKind::Cmp:
      return p;
    case PredKind::Not: {
      auto inner = run(p->getOperands()[0]);
      if (!inner)
        return inner.takeError();
      return ctx.getNot(*inner);
    }
    case PredKind::And:
    case PredKind::Or: {
      llvm::SmallVector<const Pred *, 4> ops;
      for (const Pred *op : p->getOperands()) {
        auto inner = run(op);
        if (!inner)
          return inner.takeError();
        ops.push_back(*inner);
      }
      return p->getKind() == PredKind::And ? ctx.getAnd(ops) : ctx.getOr(ops);
    }
    case PredKind::Any: {
      // Check the size of the whole (outermost) union before building
      // anything, so that nested or huge unions fail at once.
      if (unionDepth == 0) {
        size_t size = unrolledSize(p);
        size_t budget = options.maxUnrolledAtoms -
                        std::min(atoms, options.maxUnrolledAtoms);
        if (size > budget) {
          std::string count =
              size >= SIZE_MAX / 2 ? "too many" : std::to_string(size);
          return fail(ctx.getOrigin(p),
                      "unrolling the bounded unions gives " + count +
                          " atoms; a rule may unroll to at most " +
                          llvm::Twine(options.maxUnrolledAtoms) +
                          " in all (narrow the unions' bounds)");
        }
        atoms += size;
      }
      ++unionDepth;
      auto body = run(p->getBody());
      --unionDepth;
      if (!body)
        return body.takeError();
      llvm::SmallVector<const Pred *, 16> parts;
      // Constants folded in the copies overflow at the union.
      ctx.setCurrentOrigin(ctx.getOrigin(p));
      for (int64_t d = p->getLower();; ++d) {
        parts.push_back(ctx.substitute(*body, p->getUnionVar(), d));
        if (d == p->getUpper())
          break;
      }
      return ctx.getOr(parts);
    }
    }
    llvm_unreachable("unknown predicate kind");
  }
};
} // namespace

llvm::Expected<const Pred *>
cmask::unrollUnions(ExprContext &ctx, const Pred *pred,
                    const NormalizeOptions &options) {
  return Unroller(ctx, options).run(pred);
}

//===----------------------------------------------------------------------===//
// NNF
//===----------------------------------------------------------------------===//

static const Pred *nnf(ExprContext &ctx, const Pred *p, bool negated) {
  switch (p->getKind()) {
  case PredKind::True:
  case PredKind::False:
  case PredKind::Cmp:
    return negated ? ctx.getNot(p) : p;
  case PredKind::Not:
    return nnf(ctx, p->getOperands()[0], !negated);
  case PredKind::And:
  case PredKind::Or: {
    llvm::SmallVector<const Pred *, 4> ops;
    for (const Pred *op : p->getOperands())
      ops.push_back(nnf(ctx, op, negated));
    bool conj = (p->getKind() == PredKind::And) != negated;
    return conj ? ctx.getAnd(ops) : ctx.getOr(ops);
  }
  case PredKind::Any:
    llvm_unreachable("unroll unions before computing the NNF");
  }
  llvm_unreachable("unknown predicate kind");
}

const Pred *cmask::toNNF(ExprContext &ctx, const Pred *pred) {
  return nnf(ctx, pred, /*negated=*/false);
}

//===----------------------------------------------------------------------===//
// Isolating j
//===----------------------------------------------------------------------===//

bool cmask::isJBound(const Pred *atom) {
  if (atom->getKind() != PredKind::Cmp)
    return false;
  const Expr *lhs = atom->getLHS();
  return lhs->getKind() == ExprKind::Var && lhs->getVar() == Var::J &&
         (atom->getCmpKind() == CmpKind::GE ||
          atom->getCmpKind() == CmpKind::LT) &&
         !atom->getRHS()->dependsOnJ();
}

namespace {
/// Solves one atom for j. `origin` is the user atom diagnostics point at.
struct Isolator {
  ExprContext &ctx;
  const Pred *atom;
  const void *origin;

  llvm::Error cannot(const llvm::Twine &why) {
    return fail(origin, "cannot isolate j in `" + atom->str() + "`: " + why);
  }

  /// `lhs <kind> rhs` with j anywhere.
  llvm::Expected<const Pred *> solveCmp(CmpKind kind, const Expr *lhs,
                                        const Expr *rhs) {
    LinearForm diff = ctx.linearize(ctx.getSub(lhs, rhs));
    const Expr *term = nullptr;
    int64_t coeff = 0;
    LinearForm rest;
    rest.constant = diff.constant;
    for (auto &[t, c] : diff.terms) {
      if (!t->dependsOnJ()) {
        rest.terms.push_back({t, c});
        continue;
      }
      if (term)
        return cannot("j appears in two terms that cannot be combined, `" +
                      term->str() + "` and `" + t->str() + "`");
      term = t;
      coeff = c;
    }
    if (!term) // j cancelled out
      return ctx.getCmp(kind, ctx.fromLinear(diff), ctx.getConst(0));
    // coeff * term + rest <kind> 0  <=>  coeff * term <kind> -rest
    return solveScaled(term, coeff, kind, ctx.getNeg(ctx.fromLinear(rest)));
  }

  /// `c * t <kind> e` with t a j-term and c a non-zero constant.
  llvm::Expected<const Pred *> solveScaled(const Expr *t, int64_t c,
                                           CmpKind kind, const Expr *e) {
    auto both = [&](CmpKind k1, CmpKind k2,
                    bool conj) -> llvm::Expected<const Pred *> {
      auto a = solveScaled(t, c, k1, e);
      if (!a)
        return a.takeError();
      auto b = solveScaled(t, c, k2, e);
      if (!b)
        return b.takeError();
      return conj ? ctx.getAnd({*a, *b}) : ctx.getOr({*a, *b});
    };
    const Expr *one = ctx.getConst(1);
    switch (kind) {
    case CmpKind::EQ:
      return both(CmpKind::LE, CmpKind::GE, /*conj=*/true);
    case CmpKind::NE:
      return both(CmpKind::LT, CmpKind::GT, /*conj=*/false);
    case CmpKind::LT:
      return solveScaled(t, c, CmpKind::LE, ctx.getSub(e, one));
    case CmpKind::GT:
      return solveScaled(t, c, CmpKind::GE, ctx.getAdd(e, one));
    case CmpKind::LE:
      // c > 0: t <= floor(e / c).  c < 0: t >= ceil(-e / -c).
      if (c > 0)
        return bound(t, /*lower=*/false,
                     ctx.getAdd(ctx.getFloorDiv(e, ctx.getConst(c)), one));
      return bound(t, /*lower=*/true, ctx.getCeilDiv(ctx.getNeg(e), -c));
    case CmpKind::GE:
      // c > 0: t >= ceil(e / c).  c < 0: t <= floor(-e / -c).
      if (c > 0)
        return bound(t, /*lower=*/true, ctx.getCeilDiv(e, c));
      return bound(
          t, /*lower=*/false,
          ctx.getAdd(ctx.getFloorDiv(ctx.getNeg(e), ctx.getConst(-c)), one));
    }
    llvm_unreachable("unknown comparison");
  }

  /// `t >= x` (lower) or `t < x` (upper) with t a j-term, x free of j.
  llvm::Expected<const Pred *> bound(const Expr *t, bool lower, const Expr *x) {
    CmpKind kind = lower ? CmpKind::GE : CmpKind::LT;
    switch (t->getKind()) {
    case ExprKind::Var:
      return ctx.getCmp(kind, t, x);
    case ExprKind::FloorDiv: {
      const Expr *divisor = t->getOperand(1);
      if (!divisor->isConst() || divisor->getValue() <= 0)
        return cannot("`" + t->str() +
                      "` divides a j expression by something other than a "
                      "positive constant");
      // floor(u / C) >= x <=> u >= C * x;  floor(u / C) < x <=> u < C * x.
      return solveCmp(kind, t->getOperand(0), ctx.getMul(divisor, x));
    }
    case ExprKind::Min:
    case ExprKind::Max: {
      // min >= x and max < x need every operand; the others need one.
      bool conj = (t->getKind() == ExprKind::Min) == lower;
      llvm::SmallVector<const Pred *, 4> parts;
      for (const Expr *op : t->getOperands()) {
        auto part = solveCmp(kind, op, x);
        if (!part)
          return part.takeError();
        parts.push_back(*part);
      }
      return conj ? ctx.getAnd(parts) : ctx.getOr(parts);
    }
    case ExprKind::Seg: {
      const Expr *pos = t->getOperand(0);
      if (!(pos->getKind() == ExprKind::Var && pos->getVar() == Var::J))
        return cannot("`" + t->str() +
                      "` takes the segment of a position other than j itself");
      // seg(j) >= x <=> j >= seg_start(x);  seg(j) < x <=> j < seg_start(x).
      return ctx.getCmp(kind, pos, ctx.getSegStart(t->getName(), x));
    }
    case ExprKind::Mul:
      return cannot("`" + t->str() +
                    "` multiplies j by a factor that is not a constant");
    case ExprKind::Mod:
      return cannot("`" + t->str() +
                    "` takes j modulo a value; the keys it selects are not a "
                    "bounded number of intervals");
    case ExprKind::Lookup:
      return cannot("`" + t->str() + "` indexes a metadata array by j");
    case ExprKind::Isqrt:
      return cannot("`" + t->str() + "` takes the square root of j");
    case ExprKind::Select:
      return cannot("`" + t->str() +
                    "` selects on j; write the cases with `or` instead");
    case ExprKind::SegStart:
    case ExprKind::SegEnd:
      return cannot("`" + t->str() +
                    "` takes a boundary of a j-dependent "
                    "segment");
    default:
      return cannot("`" + t->str() + "` is not linear in j");
    }
  }
};
} // namespace

llvm::Expected<const Pred *> cmask::isolateJ(ExprContext &ctx,
                                             const Pred *cmp) {
  if (!cmp->dependsOnJ() || isJBound(cmp))
    return cmp;
  assert(cmp->getKind() == PredKind::Cmp && "isolateJ expects a comparison");
  Isolator iso{ctx, cmp, ctx.getOrigin(cmp)};
  auto result = iso.solveCmp(cmp->getCmpKind(), cmp->getLHS(), cmp->getRHS());
  if (result)
    ctx.inheritOrigin(*result, cmp);
  return result;
}

llvm::Expected<const Pred *> cmask::isolateAll(ExprContext &ctx,
                                               const Pred *nnf) {
  switch (nnf->getKind()) {
  case PredKind::True:
  case PredKind::False:
    return nnf;
  case PredKind::Cmp:
    ctx.setCurrentOrigin(ctx.getOrigin(nnf));
    return isolateJ(ctx, nnf);
  case PredKind::And:
  case PredKind::Or: {
    llvm::SmallVector<const Pred *, 4> ops;
    for (const Pred *op : nnf->getOperands()) {
      auto inner = isolateAll(ctx, op);
      if (!inner)
        return inner.takeError();
      ops.push_back(*inner);
    }
    return nnf->getKind() == PredKind::And ? ctx.getAnd(ops) : ctx.getOr(ops);
  }
  case PredKind::Not:
  case PredKind::Any:
    break;
  }
  llvm_unreachable("isolateAll expects a predicate in NNF without unions");
}

//===----------------------------------------------------------------------===//
// DNF
//===----------------------------------------------------------------------===//

namespace {
struct Distributor {
  ExprContext &ctx;
  const NormalizeOptions &options;

  llvm::Error tooLarge() {
    return fail(nullptr, "the rule's disjunctive normal form would have more "
                         "than " +
                             llvm::Twine(options.maxConjuncts) +
                             " conjuncts; simplify the rule or split it into "
                             "several regions");
  }

  /// Adds `c` to `out` unless it is contradictory or already there.
  void add(llvm::SmallVectorImpl<Conjunct> &out,
           llvm::DenseSet<const Pred *> &seen, Conjunct c) {
    llvm::sort(c, [](const Pred *a, const Pred *b) {
      return a->getId() < b->getId();
    });
    c.erase(std::unique(c.begin(), c.end()), c.end());
    for (const Pred *atom : c)
      if (atom->getKind() == PredKind::Cmp &&
          llvm::is_contained(c, ctx.getNot(atom)))
        return;
    if (seen.insert(ctx.getAnd(c)).second)
      out.push_back(std::move(c));
  }

  llvm::Expected<llvm::SmallVector<Conjunct, 4>> run(const Pred *p) {
    llvm::SmallVector<Conjunct, 4> out;
    llvm::DenseSet<const Pred *> seen;
    switch (p->getKind()) {
    case PredKind::True:
      out.emplace_back();
      return out;
    case PredKind::False:
      return out;
    case PredKind::Cmp:
      out.push_back({p});
      return out;
    case PredKind::Or:
      for (const Pred *op : p->getOperands()) {
        auto inner = run(op);
        if (!inner)
          return inner.takeError();
        for (Conjunct &c : *inner)
          add(out, seen, std::move(c));
        if (out.size() > options.maxConjuncts)
          return tooLarge();
      }
      return out;
    case PredKind::And: {
      out.emplace_back();
      for (const Pred *op : p->getOperands()) {
        auto inner = run(op);
        if (!inner)
          return inner.takeError();
        if (out.size() * inner->size() > options.maxConjuncts)
          return tooLarge();
        llvm::SmallVector<Conjunct, 4> next;
        seen.clear();
        for (const Conjunct &a : out)
          for (const Conjunct &b : *inner) {
            Conjunct c(a);
            c.append(b.begin(), b.end());
            add(next, seen, std::move(c));
          }
        out = std::move(next);
      }
      return out;
    }
    case PredKind::Not:
    case PredKind::Any:
      break;
    }
    llvm_unreachable("toDNF expects a predicate in NNF without unions");
  }
};
} // namespace

llvm::Expected<DNF> cmask::toDNF(ExprContext &ctx, const Pred *nnf,
                                 const NormalizeOptions &options) {
  auto conjuncts = Distributor{ctx, options}.run(nnf);
  if (!conjuncts)
    return conjuncts.takeError();
  DNF dnf;
  dnf.conjuncts = std::move(*conjuncts);
  return dnf;
}

llvm::Expected<DNF> cmask::normalizeRule(ExprContext &ctx, const Pred *rule,
                                         const NormalizeOptions &options) {
  auto unrolled = unrollUnions(ctx, rule, options);
  if (!unrolled)
    return unrolled.takeError();
  auto isolated = isolateAll(ctx, toNNF(ctx, *unrolled));
  if (!isolated)
    return isolated.takeError();
  if (ctx.hasOverflowed())
    return fail(ctx.getOverflowOrigin(),
                "constant arithmetic here overflows 64-bit integers (the "
                "compiler's exact rewrites would no longer match the 64-bit "
                "evaluation); use smaller constants");
  return toDNF(ctx, *isolated, options);
}

const Pred *cmask::toPred(ExprContext &ctx, const DNF &dnf) {
  llvm::SmallVector<const Pred *, 4> ors;
  for (const Conjunct &c : dnf.conjuncts)
    ors.push_back(ctx.getAnd(c));
  return ctx.getOr(ors);
}

llvm::Expected<DNF> cmask::fromPred(ExprContext &ctx, const Pred *pred) {
  auto notDNF = [&] {
    return fail(ctx.getOrigin(pred),
                "the rule is not in disjunctive normal form; run "
                "cmask-normalize-dnf first");
  };
  auto conjunct = [&](const Pred *p, Conjunct &out) {
    if (p->getKind() == PredKind::True)
      return true;
    if (p->getKind() == PredKind::Cmp) {
      out.push_back(p);
      return true;
    }
    if (p->getKind() != PredKind::And)
      return false;
    for (const Pred *atom : p->getOperands()) {
      if (atom->getKind() != PredKind::Cmp)
        return false;
      out.push_back(atom);
    }
    return true;
  };
  DNF dnf;
  if (pred->isFalse())
    return dnf;
  llvm::ArrayRef<const Pred *> disjuncts(pred);
  if (pred->getKind() == PredKind::Or)
    disjuncts = pred->getOperands();
  for (const Pred *d : disjuncts) {
    Conjunct c;
    if (!conjunct(d, c))
      return notDNF();
    dnf.conjuncts.push_back(std::move(c));
  }
  return dnf;
}
