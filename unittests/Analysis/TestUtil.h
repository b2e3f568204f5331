//===- TestUtil.h - Shared helpers of the Analysis unit tests ---*- C++ -*-===//
//
// A concrete Env, a tiny expression-building DSL over ExprContext, error
// helpers for llvm::Expected / AnalysisError, and brute-force helpers that
// compare a predicate against its rewritten form on concrete values.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_UNITTESTS_ANALYSIS_TESTUTIL_H
#define CMASK_UNITTESTS_ANALYSIS_TESTUTIL_H

#include "cmask/Analysis/Eval.h"
#include "cmask/Analysis/Expr.h"
#include "cmask/Analysis/Intervals.h"
#include "cmask/Analysis/Normalize.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#define CMASK_TEST_CAT2(a, b) a##b
#define CMASK_TEST_CAT(a, b) CMASK_TEST_CAT2(a, b)

/// `lhs = *rexpr`, failing the test (fatally) with the error message when
/// the llvm::Expected holds an error.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                       \
  ASSERT_OK_AND_ASSIGN_IMPL(CMASK_TEST_CAT(expected_, __LINE__), lhs, rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr)                             \
  auto tmp = (rexpr);                                                          \
  ASSERT_TRUE(static_cast<bool>(tmp))                                          \
      << "unexpected error: " << llvm::toString(tmp.takeError());              \
  lhs = std::move(*tmp)

namespace cmask {
namespace test {

//===----------------------------------------------------------------------===//
// Concrete environment
//===----------------------------------------------------------------------===//

class TestEnv : public Env {
public:
  int64_t i = 0, j = 0, b = 0, qLen = 0, kLen = 0;
  llvm::StringMap<int64_t> scalars;
  llvm::StringMap<std::vector<int64_t>> arrays;
  llvm::StringMap<std::vector<int64_t>> offs;

  int64_t var(Var v) const override {
    switch (v) {
    case Var::I:
      return i;
    case Var::J:
      return j;
    case Var::B:
      return b;
    case Var::QLen:
      return qLen;
    case Var::KLen:
      return kLen;
    }
    ADD_FAILURE() << "unknown variable";
    return 0;
  }
  int64_t scalar(llvm::StringRef name) const override {
    auto it = scalars.find(name);
    if (it == scalars.end()) {
      ADD_FAILURE() << "unknown scalar " << name.str();
      return 0;
    }
    return it->second;
  }
  int64_t lookup(llvm::StringRef name, int64_t index) const override {
    auto it = arrays.find(name);
    if (it == arrays.end()) {
      ADD_FAILURE() << "unknown array " << name.str();
      return 0;
    }
    if (index < 0 || index >= static_cast<int64_t>(it->second.size()))
      return 0;
    return it->second[index];
  }
  llvm::ArrayRef<int64_t> offsets(llvm::StringRef name) const override {
    auto it = offs.find(name);
    if (it == offs.end()) {
      ADD_FAILURE() << "unknown offsets " << name.str();
      return {};
    }
    return it->second;
  }
};

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

struct CaughtError {
  bool isAnalysisError = false;
  std::string message;
  const void *origin = nullptr;
};

inline CaughtError catchError(llvm::Error err) {
  CaughtError out;
  llvm::handleAllErrors(
      std::move(err),
      [&](const AnalysisError &e) {
        out.isAnalysisError = true;
        out.message = e.getMessage();
        out.origin = e.getOrigin();
      },
      [&](const llvm::ErrorInfoBase &e) { out.message = e.message(); });
  return out;
}

/// The error of an Expected that must have failed (a test failure if not).
template <typename T> CaughtError expectError(llvm::Expected<T> value) {
  if (value) {
    ADD_FAILURE() << "expected an error";
    return {};
  }
  return catchError(value.takeError());
}

//===----------------------------------------------------------------------===//
// Expression DSL
//===----------------------------------------------------------------------===//

/// An expression handle with arithmetic operators that go through the
/// context's simplifying builders.
struct E {
  ExprContext *ctx;
  const Expr *e;
  operator const Expr *() const { return e; }
  const Expr *operator->() const { return e; }
};

inline E operator+(E a, E b) { return {a.ctx, a.ctx->getAdd(a, b)}; }
inline E operator+(E a, int64_t c) {
  return {a.ctx, a.ctx->getAdd(a, a.ctx->getConst(c))};
}
inline E operator+(int64_t c, E a) {
  return {a.ctx, a.ctx->getAdd(a.ctx->getConst(c), a)};
}
inline E operator-(E a, E b) { return {a.ctx, a.ctx->getSub(a, b)}; }
inline E operator-(E a, int64_t c) {
  return {a.ctx, a.ctx->getSub(a, a.ctx->getConst(c))};
}
inline E operator-(int64_t c, E a) {
  return {a.ctx, a.ctx->getSub(a.ctx->getConst(c), a)};
}
inline E operator-(E a) { return {a.ctx, a.ctx->getNeg(a)}; }
inline E operator*(E a, E b) { return {a.ctx, a.ctx->getMul(a, b)}; }
inline E operator*(E a, int64_t c) {
  return {a.ctx, a.ctx->getMul(a, a.ctx->getConst(c))};
}
inline E operator*(int64_t c, E a) {
  return {a.ctx, a.ctx->getMul(a.ctx->getConst(c), a)};
}

/// Builds expressions and predicates of one context.
class Builder {
public:
  explicit Builder(ExprContext &ctx) : ctx(ctx) {}
  ExprContext &ctx;

  E wrap(const Expr *e) { return {&ctx, e}; }
  const Expr *ex(const Expr *e) { return e; }
  const Expr *ex(E e) { return e.e; }
  const Expr *ex(int64_t v) { return ctx.getConst(v); }

  E i() { return wrap(ctx.getVar(Var::I)); }
  E j() { return wrap(ctx.getVar(Var::J)); }
  E b() { return wrap(ctx.getVar(Var::B)); }
  E qLen() { return wrap(ctx.getVar(Var::QLen)); }
  E kLen() { return wrap(ctx.getVar(Var::KLen)); }
  E c(int64_t v) { return wrap(ctx.getConst(v)); }
  E d(int64_t id) { return wrap(ctx.getUnionVar(id)); }
  E scalar(llvm::StringRef name) { return wrap(ctx.getScalar(name)); }
  template <typename T> E lookup(llvm::StringRef name, T index) {
    return wrap(ctx.getLookup(name, ex(index)));
  }
  template <typename T> E seg(llvm::StringRef name, T pos) {
    return wrap(ctx.getSeg(name, ex(pos)));
  }
  template <typename T> E segStart(llvm::StringRef name, T s) {
    return wrap(ctx.getSegStart(name, ex(s)));
  }
  template <typename T> E segEnd(llvm::StringRef name, T s) {
    return wrap(ctx.getSegEnd(name, ex(s)));
  }
  template <typename A, typename B> E floordiv(A a, B b) {
    return wrap(ctx.getFloorDiv(ex(a), ex(b)));
  }
  template <typename A, typename B> E mod(A a, B b) {
    return wrap(ctx.getMod(ex(a), ex(b)));
  }
  template <typename A, typename B> E min(A a, B b) {
    return wrap(ctx.getMin(ex(a), ex(b)));
  }
  template <typename A, typename B> E max(A a, B b) {
    return wrap(ctx.getMax(ex(a), ex(b)));
  }
  template <typename A, typename B> E select(const Pred *cond, A a, B b) {
    return wrap(ctx.getSelect(cond, ex(a), ex(b)));
  }
  template <typename A> E isqrt(A a) { return wrap(ctx.getIsqrt(ex(a))); }

  template <typename A, typename B> const Pred *cmp(CmpKind k, A a, B b) {
    return ctx.getCmp(k, ex(a), ex(b));
  }
  template <typename A, typename B> const Pred *eq(A a, B b) {
    return cmp(CmpKind::EQ, a, b);
  }
  template <typename A, typename B> const Pred *ne(A a, B b) {
    return cmp(CmpKind::NE, a, b);
  }
  template <typename A, typename B> const Pred *lt(A a, B b) {
    return cmp(CmpKind::LT, a, b);
  }
  template <typename A, typename B> const Pred *le(A a, B b) {
    return cmp(CmpKind::LE, a, b);
  }
  template <typename A, typename B> const Pred *gt(A a, B b) {
    return cmp(CmpKind::GT, a, b);
  }
  template <typename A, typename B> const Pred *ge(A a, B b) {
    return cmp(CmpKind::GE, a, b);
  }
  const Pred *and_(llvm::ArrayRef<const Pred *> ps) { return ctx.getAnd(ps); }
  const Pred *or_(llvm::ArrayRef<const Pred *> ps) { return ctx.getOr(ps); }
  const Pred *not_(const Pred *p) { return ctx.getNot(p); }
  const Pred *any(int64_t id, int64_t lo, int64_t hi, const Pred *body) {
    return ctx.getAny(id, lo, hi, body);
  }
};

//===----------------------------------------------------------------------===//
// Structural checks
//===----------------------------------------------------------------------===//

/// True if `p` is built from and/or/true/false over atoms that are j bounds
/// (`j >= e`, `j < e`) or free of j: the output form of isolateJ.
inline bool isIsolatedForm(const Pred *p) {
  switch (p->getKind()) {
  case PredKind::True:
  case PredKind::False:
    return true;
  case PredKind::Cmp:
    return isJBound(p) || !p->dependsOnJ();
  case PredKind::And:
  case PredKind::Or:
    return llvm::all_of(p->getOperands(), isIsolatedForm);
  case PredKind::Not:
  case PredKind::Any:
    return false;
  }
  return false;
}

/// True if `p` is in NNF: no `not`, no unions.
inline bool isNNF(const Pred *p) {
  switch (p->getKind()) {
  case PredKind::True:
  case PredKind::False:
  case PredKind::Cmp:
    return true;
  case PredKind::And:
  case PredKind::Or:
    return llvm::all_of(p->getOperands(), isNNF);
  case PredKind::Not:
  case PredKind::Any:
    return false;
  }
  return false;
}

inline bool mentionsUnionVar(const Expr *e);
inline bool mentionsUnionVar(const Pred *p) {
  if (p->getKind() == PredKind::Any)
    return true;
  if (p->getKind() == PredKind::Cmp)
    return mentionsUnionVar(p->getLHS()) || mentionsUnionVar(p->getRHS());
  return llvm::any_of(p->getOperands(),
                      [](const Pred *o) { return mentionsUnionVar(o); });
}
inline bool mentionsUnionVar(const Expr *e) {
  if (e->getKind() == ExprKind::UnionVar)
    return true;
  if (e->getCond() && mentionsUnionVar(e->getCond()))
    return true;
  return llvm::any_of(e->getOperands(),
                      [](const Expr *o) { return mentionsUnionVar(o); });
}

//===----------------------------------------------------------------------===//
// Slots on concrete values
//===----------------------------------------------------------------------===//

inline int64_t clampTo(int64_t v, int64_t kLen) {
  return std::min(std::max(v, int64_t(0)), kLen);
}

/// The keys of row env.i that the slots show: a bit vector over [0, k_len).
inline std::vector<bool> visibleKeys(llvm::ArrayRef<Slot> slots,
                                     const TestEnv &env) {
  std::vector<bool> out(std::max<int64_t>(env.kLen, 0), false);
  for (const Slot &s : slots) {
    if (!evaluate(s.cond, env))
      continue;
    int64_t lo = clampTo(evaluate(s.lo, env), env.kLen);
    int64_t hi = clampTo(evaluate(s.hi, env), env.kLen);
    for (int64_t k = lo; k < hi; ++k)
      out[k] = true;
  }
  return out;
}

/// The keys of row env.i that `rule` shows (env.j is overwritten).
inline std::vector<bool> visibleKeys(const Pred *rule, TestEnv env) {
  std::vector<bool> out(std::max<int64_t>(env.kLen, 0), false);
  for (int64_t k = 0; k < env.kLen; ++k) {
    env.j = k;
    out[k] = evaluate(rule, env);
  }
  return out;
}

inline std::string showKeys(const std::vector<bool> &keys) {
  std::string s;
  for (bool v : keys)
    s += v ? '1' : '.';
  return s;
}

inline std::string showSlots(llvm::ArrayRef<Slot> slots) {
  std::string s;
  for (const Slot &slot : slots)
    s += "  " + slot.str() + "\n";
  return s;
}

} // namespace test
} // namespace cmask

#endif // CMASK_UNITTESTS_ANALYSIS_TESTUTIL_H
