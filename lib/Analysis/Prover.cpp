//===- Prover.cpp - Linear facts about row expressions --------------------===//
//
// Refutation by Fourier-Motzkin elimination over the integers. Constraints
// are `sum(a_k * t_k) + c >= 0` over opaque terms t_k. After dividing by the
// gcd of the coefficients the constant is rounded down, which is valid for
// integers and closes many gaps of rational reasoning. Overflowing
// combinations are dropped, which only weakens the constraint set: the
// prover stays sound.
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Prover.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <map>
#include <numeric>
#include <optional>
#include <set>

using namespace cmask;

namespace {
using Int = __int128;

/// `sum(coeffs[k] * term_k) + constant >= 0`, terms sorted by id.
struct Constraint {
  std::vector<std::pair<const Expr *, int64_t>> coeffs;
  int64_t constant = 0;

  bool operator<(const Constraint &o) const {
    if (constant != o.constant)
      return constant < o.constant;
    if (coeffs.size() != o.coeffs.size())
      return coeffs.size() < o.coeffs.size();
    for (size_t k = 0; k < coeffs.size(); ++k) {
      if (coeffs[k].first != o.coeffs[k].first)
        return coeffs[k].first->getId() < o.coeffs[k].first->getId();
      if (coeffs[k].second != o.coeffs[k].second)
        return coeffs[k].second < o.coeffs[k].second;
    }
    return false;
  }
};

bool fits(Int v) { return v >= INT64_MIN && v <= INT64_MAX; }

Int floorDiv(Int a, Int b) {
  Int q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0)))
    --q;
  return q;
}

/// Builds `sum(scale_k * form_k) + extra >= 0`; nullopt on overflow.
std::optional<Constraint>
makeConstraint(llvm::ArrayRef<std::pair<const LinearForm *, Int>> parts,
               Int extra) {
  std::map<unsigned, std::pair<const Expr *, Int>> acc;
  Int constant = extra;
  for (auto &[form, scale] : parts) {
    constant += scale * form->constant;
    for (auto &[t, c] : form->terms) {
      auto &slot = acc[t->getId()];
      slot.first = t;
      slot.second += scale * c;
      if (!fits(slot.second))
        return std::nullopt;
    }
    if (!fits(constant))
      return std::nullopt;
  }
  Constraint out;
  Int g = 0;
  for (auto &[id, tc] : acc)
    if (tc.second != 0) {
      out.coeffs.push_back({tc.first, static_cast<int64_t>(tc.second)});
      Int a = tc.second < 0 ? -tc.second : tc.second;
      g = g == 0 ? a
                 : std::gcd(static_cast<uint64_t>(g), static_cast<uint64_t>(a));
    }
  if (g > 1) {
    for (auto &tc : out.coeffs)
      tc.second = static_cast<int64_t>(tc.second / g);
    constant = floorDiv(constant, g);
  }
  out.constant = static_cast<int64_t>(constant);
  return out;
}

/// The constraint set of one proof attempt.
class System {
public:
  explicit System(ExprContext &ctx) : ctx(ctx) {}

  void addFact(const Pred *p) {
    if (p->getKind() == PredKind::And) {
      for (const Pred *op : p->getOperands())
        addFact(op);
      return;
    }
    if (p->getKind() != PredKind::Cmp)
      return;
    LinearForm d = ctx.linearize(ctx.getSub(p->getLHS(), p->getRHS()));
    switch (p->getCmpKind()) {
    case CmpKind::LE:
      add({{&d, -1}}, 0);
      break; // -d >= 0
    case CmpKind::LT:
      add({{&d, -1}}, -1);
      break; // -d - 1 >= 0
    case CmpKind::GE:
      add({{&d, 1}}, 0);
      break;
    case CmpKind::GT:
      add({{&d, 1}}, -1);
      break;
    case CmpKind::EQ:
      add({{&d, 1}}, 0);
      add({{&d, -1}}, 0);
      break;
    case CmpKind::NE:
      break;
    }
  }

  /// `a - b + extra >= 0`.
  void addDiff(const Expr *a, const Expr *b, int64_t extra) {
    LinearForm d = ctx.linearize(ctx.getSub(a, b));
    add({{&d, 1}}, extra);
  }

  /// Adds the facts implied by the definitions of the opaque terms.
  void addTermFacts() {
    llvm::DenseSet<const Expr *> done;
    for (size_t round = 0; round < 4; ++round) {
      std::vector<const Expr *> terms;
      for (const Constraint &c : constraints)
        for (auto &[t, _] : c.coeffs)
          if (done.insert(t).second)
            terms.push_back(t);
      if (terms.empty())
        return;
      for (const Expr *t : terms)
        addDefinitionFacts(t);
    }
  }

  /// True if the constraints have no integer solution (as far as FM sees).
  bool infeasible() {
    std::set<Constraint> current(constraints.begin(), constraints.end());
    while (true) {
      // Check constants and collect variables.
      std::map<unsigned, std::pair<const Expr *, std::pair<size_t, size_t>>>
          vars;
      for (const Constraint &c : current) {
        if (c.coeffs.empty() && c.constant < 0)
          return true;
        for (auto &[t, a] : c.coeffs) {
          auto &v = vars[t->getId()];
          v.first = t;
          (a > 0 ? v.second.first : v.second.second)++;
        }
      }
      if (vars.empty())
        return false;
      // Eliminate the variable with the fewest new constraints.
      const Expr *best = nullptr;
      size_t bestCost = SIZE_MAX;
      for (auto &[id, v] : vars) {
        size_t cost = v.second.first * v.second.second;
        if (cost < bestCost) {
          bestCost = cost;
          best = v.first;
        }
      }
      std::set<Constraint> next;
      std::vector<std::pair<const Constraint *, int64_t>> pos, neg;
      for (const Constraint &c : current) {
        int64_t a = 0;
        for (auto &[t, k] : c.coeffs)
          if (t == best)
            a = k;
        if (a > 0)
          pos.push_back({&c, a});
        else if (a < 0)
          neg.push_back({&c, -a});
        else
          next.insert(c);
      }
      for (auto &[p, a] : pos)
        for (auto &[n, b] : neg) {
          LinearForm fp = toForm(*p), fn = toForm(*n);
          if (auto c = makeConstraint({{&fp, b}, {&fn, a}}, 0)) {
            if (c->coeffs.empty() && c->constant >= 0)
              continue;
            next.insert(*c);
          }
          if (next.size() > kBudget)
            return false;
        }
      current = std::move(next);
    }
  }

private:
  static constexpr size_t kBudget = 4000;

  static LinearForm toForm(const Constraint &c) {
    LinearForm f;
    f.constant = c.constant;
    f.terms.assign(c.coeffs.begin(), c.coeffs.end());
    return f;
  }

  void add(llvm::ArrayRef<std::pair<const LinearForm *, Int>> parts,
           Int extra) {
    if (auto c = makeConstraint(parts, extra))
      constraints.push_back(*c);
  }

  void addDefinitionFacts(const Expr *t) {
    switch (t->getKind()) {
    case ExprKind::Min:
      for (const Expr *op : t->getOperands())
        addDiff(op, t, 0); // op - min >= 0
      break;
    case ExprKind::Max:
      for (const Expr *op : t->getOperands())
        addDiff(t, op, 0); // max - op >= 0
      break;
    case ExprKind::Isqrt:
    case ExprKind::Seg:
    case ExprKind::SegStart:
      addDiff(t, ctx.getConst(0), 0);
      break;
    case ExprKind::SegEnd:
      addDiff(t, ctx.getSegStart(t->getName(), t->getOperand(0)), 0);
      break;
    case ExprKind::FloorDiv: {
      const Expr *x = t->getOperand(0), *c = t->getOperand(1);
      if (!c->isConst() || c->getValue() <= 0)
        break;
      const Expr *ct = ctx.getMul(c, t);
      addDiff(x, ct, 0);                 // x - C*t >= 0
      addDiff(ct, x, c->getValue() - 1); // C*t + C - 1 - x >= 0
      break;
    }
    case ExprKind::Mod: {
      const Expr *c = t->getOperand(1);
      if (!c->isConst() || c->getValue() <= 0)
        break;
      addDiff(t, ctx.getConst(0), 0);
      addDiff(ctx.getConst(c->getValue() - 1), t, 0);
      break;
    }
    default:
      break;
    }
    // The segment of row i contains i:
    // seg_start(seg(i)) <= i < seg_end(seg(i)).
    if ((t->getKind() == ExprKind::SegStart ||
         t->getKind() == ExprKind::SegEnd) &&
        t->getOperand(0)->getKind() == ExprKind::Seg &&
        t->getOperand(0)->getName() == t->getName()) {
      const Expr *pos = t->getOperand(0)->getOperand(0);
      if (pos->getKind() == ExprKind::Var && pos->getVar() == Var::I) {
        if (t->getKind() == ExprKind::SegStart)
          addDiff(pos, t, 0);
        else
          addDiff(t, pos, -1);
      }
    }
  }

  ExprContext &ctx;
  std::vector<Constraint> constraints;
};
} // namespace

Prover::Prover(ExprContext &ctx, llvm::ArrayRef<const Pred *> facts)
    : ctx(ctx), facts(facts.begin(), facts.end()) {}

bool Prover::proveInfeasible(llvm::ArrayRef<const Pred *> extra) {
  System sys(ctx);
  for (const Pred *f : facts)
    sys.addFact(f);
  for (const Pred *f : extra) {
    if (f->isFalse())
      return true;
    sys.addFact(f);
  }
  sys.addTermFacts();
  return sys.infeasible();
}

bool Prover::proveLE(const Expr *a, const Expr *b,
                     llvm::ArrayRef<const Pred *> extra) {
  if (a == b)
    return true;
  LinearForm d = ctx.linearize(ctx.getSub(b, a));
  if (d.isConstant())
    return d.constant >= 0;
  System sys(ctx);
  for (const Pred *f : facts)
    sys.addFact(f);
  for (const Pred *f : extra)
    sys.addFact(f);
  sys.addDiff(a, b, -1); // the negated goal: a - b - 1 >= 0
  sys.addTermFacts();
  return sys.infeasible();
}

bool Prover::proveLT(const Expr *a, const Expr *b,
                     llvm::ArrayRef<const Pred *> extra) {
  return proveLE(ctx.getAdd(a, ctx.getConst(1)), b, extra);
}

llvm::SmallVector<const Pred *, 4> Prover::domainFacts(ExprContext &ctx) {
  const Expr *zero = ctx.getConst(0);
  const Expr *i = ctx.getVar(Var::I);
  return {ctx.getCmp(CmpKind::GE, i, zero),
          ctx.getCmp(CmpKind::LT, i, ctx.getVar(Var::QLen)),
          ctx.getCmp(CmpKind::GE, ctx.getVar(Var::KLen), zero),
          ctx.getCmp(CmpKind::GE, ctx.getVar(Var::B), zero)};
}
