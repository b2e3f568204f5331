//===- Eval.cpp - Evaluate expressions on concrete values -----------------===//
//
// evaluate() of Eval.h: expressions on 64-bit integers, predicates on
// booleans, unions (`any`) by enumerating their values, segments by counting
// the boundaries at or below a position.
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Eval.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace cmask;

Env::~Env() = default;

int64_t cmask::segmentIndex(llvm::ArrayRef<int64_t> bounds, int64_t position) {
  return llvm::count_if(bounds, [&](int64_t o) { return o <= position; });
}

int64_t cmask::segmentBoundary(llvm::ArrayRef<int64_t> bounds, int64_t k,
                               int64_t length) {
  if (k < 0)
    return 0;
  if (k >= static_cast<int64_t>(bounds.size()))
    return length;
  return bounds[k];
}

namespace {
struct Evaluator {
  const Env &env;
  const llvm::DenseMap<int64_t, int64_t> &unions;

  int64_t seqLength() const {
    return std::max(env.var(Var::QLen), env.var(Var::KLen));
  }

  int64_t eval(const Expr *e) {
    auto op = [&](unsigned k) { return eval(e->getOperand(k)); };
    switch (e->getKind()) {
    case ExprKind::Const:
      return e->getValue();
    case ExprKind::Var:
      return env.var(e->getVar());
    case ExprKind::UnionVar:
      return unions.lookup(e->getValue());
    case ExprKind::Scalar:
      return env.scalar(e->getName());
    case ExprKind::Lookup:
      return env.lookup(e->getName(), op(0));
    case ExprKind::Seg:
      return segmentIndex(env.offsets(e->getName()), op(0));
    case ExprKind::SegStart:
      return segmentBoundary(env.offsets(e->getName()), arith::sub(op(0), 1),
                             seqLength());
    case ExprKind::SegEnd:
      return segmentBoundary(env.offsets(e->getName()), op(0), seqLength());
    case ExprKind::Add: {
      int64_t sum = 0;
      for (const Expr *o : e->getOperands())
        sum = arith::add(sum, eval(o));
      return sum;
    }
    case ExprKind::Mul:
      return arith::mul(op(0), op(1));
    case ExprKind::FloorDiv:
      return arith::floorDiv(op(0), op(1));
    case ExprKind::Mod:
      return arith::mod(op(0), op(1));
    case ExprKind::Min:
    case ExprKind::Max: {
      int64_t best = op(0);
      for (const Expr *o : e->getOperands().drop_front()) {
        int64_t v = eval(o);
        best = e->getKind() == ExprKind::Min ? std::min(best, v)
                                             : std::max(best, v);
      }
      return best;
    }
    case ExprKind::Select:
      return eval(e->getCond()) ? op(0) : op(1);
    case ExprKind::Isqrt:
      return arith::isqrt(op(0));
    }
    llvm_unreachable("unknown expression kind");
  }

  bool eval(const Pred *p) {
    switch (p->getKind()) {
    case PredKind::True:
      return true;
    case PredKind::False:
      return false;
    case PredKind::Cmp:
      return holds(p->getCmpKind(), eval(p->getLHS()), eval(p->getRHS()));
    case PredKind::And:
      return llvm::all_of(p->getOperands(),
                          [&](const Pred *o) { return eval(o); });
    case PredKind::Or:
      return llvm::any_of(p->getOperands(),
                          [&](const Pred *o) { return eval(o); });
    case PredKind::Not:
      return !eval(p->getOperands()[0]);
    case PredKind::Any: {
      llvm::DenseMap<int64_t, int64_t> inner(unions);
      for (int64_t d = p->getLower(); d <= p->getUpper(); ++d) {
        inner[p->getUnionVar()] = d;
        if (Evaluator{env, inner}.eval(p->getBody()))
          return true;
      }
      return false;
    }
    }
    llvm_unreachable("unknown predicate kind");
  }
};
} // namespace

int64_t cmask::evaluate(const Expr *expr, const Env &env,
                        const llvm::DenseMap<int64_t, int64_t> &unionValues) {
  return Evaluator{env, unionValues}.eval(expr);
}

bool cmask::evaluate(const Pred *pred, const Env &env,
                     const llvm::DenseMap<int64_t, int64_t> &unionValues) {
  return Evaluator{env, unionValues}.eval(pred);
}

int64_t cmask::evaluate(const Expr *expr, const Env &env) {
  return evaluate(expr, env, llvm::DenseMap<int64_t, int64_t>());
}

bool cmask::evaluate(const Pred *pred, const Env &env) {
  return evaluate(pred, env, llvm::DenseMap<int64_t, int64_t>());
}
