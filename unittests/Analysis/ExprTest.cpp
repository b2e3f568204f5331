//===- ExprTest.cpp - Uniquing, folding and printing of expressions -------===//

#include "TestUtil.h"

#include "cmask/Analysis/Normalize.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace cmask;
using namespace cmask::test;

namespace {

class ExprTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
};

//===----------------------------------------------------------------------===//
// Integer semantics
//===----------------------------------------------------------------------===//

/// Python's floor division, computed differently from the library (via the
/// truncating quotient and an explicit floor of the exact rational).
int64_t pyFloorDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  long double q =
      std::floor(static_cast<long double>(a) / static_cast<long double>(b));
  return static_cast<int64_t>(q);
}
int64_t pyMod(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  return a - b * pyFloorDiv(a, b);
}

TEST(ArithTest, FloorDivAndModFollowPython) {
  // A few values spelled out (Python: -7 // 2 == -4, -7 % 2 == 1, ...).
  EXPECT_EQ(arith::floorDiv(7, 2), 3);
  EXPECT_EQ(arith::floorDiv(-7, 2), -4);
  EXPECT_EQ(arith::floorDiv(7, -2), -4);
  EXPECT_EQ(arith::floorDiv(-7, -2), 3);
  EXPECT_EQ(arith::floorDiv(-8, 2), -4);
  EXPECT_EQ(arith::floorDiv(-1, 4), -1);
  EXPECT_EQ(arith::mod(7, 2), 1);
  EXPECT_EQ(arith::mod(-7, 2), 1);
  EXPECT_EQ(arith::mod(7, -2), -1);
  EXPECT_EQ(arith::mod(-7, -2), -1);
  EXPECT_EQ(arith::mod(-8, 4), 0);
  EXPECT_EQ(arith::mod(-1, 4), 3);
  // Brute force against the reference.
  for (int64_t a = -50; a <= 50; ++a)
    for (int64_t b = -12; b <= 12; ++b) {
      ASSERT_EQ(arith::floorDiv(a, b), pyFloorDiv(a, b)) << a << " // " << b;
      ASSERT_EQ(arith::mod(a, b), pyMod(a, b)) << a << " % " << b;
      if (b != 0) {
        // The defining identities: a == b*q + r, r has the sign of b.
        int64_t q = arith::floorDiv(a, b), r = arith::mod(a, b);
        ASSERT_EQ(b * q + r, a);
        ASSERT_TRUE(b > 0 ? (0 <= r && r < b) : (b < r && r <= 0));
      }
    }
}

TEST(ArithTest, DivisionByZeroIsZero) {
  for (int64_t a : {int64_t(-5), int64_t(0), int64_t(7),
                    std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(arith::floorDiv(a, 0), 0) << a;
    EXPECT_EQ(arith::mod(a, 0), 0) << a;
  }
}

TEST(ArithTest, ExtremeValuesWrapWithoutTrapping) {
  const int64_t mn = std::numeric_limits<int64_t>::min();
  const int64_t mx = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(arith::floorDiv(mn, -1), mn); // wraps, like the 64-bit negation
  EXPECT_EQ(arith::mod(mn, -1), 0);
  EXPECT_EQ(arith::floorDiv(mn, 2), mn / 2);
  EXPECT_EQ(arith::floorDiv(mx, -1), -mx);
  EXPECT_EQ(arith::mod(mx, mn), -1); // Python: mx % mn == mx + mn
  EXPECT_EQ(arith::add(mx, 1), mn);
  EXPECT_EQ(arith::sub(mn, 1), mx);
  EXPECT_EQ(arith::mul(mx, 2), -2);
}

TEST(ArithTest, Isqrt) {
  EXPECT_EQ(arith::isqrt(0), 0);
  EXPECT_EQ(arith::isqrt(1), 1);
  EXPECT_EQ(arith::isqrt(3), 1);
  EXPECT_EQ(arith::isqrt(4), 2);
  EXPECT_EQ(arith::isqrt(255), 15);
  EXPECT_EQ(arith::isqrt(256), 16);
  for (int64_t a : {int64_t(-1), int64_t(-4), int64_t(-1000000),
                    std::numeric_limits<int64_t>::min()})
    EXPECT_EQ(arith::isqrt(a), 0) << a;
  for (int64_t a = 0; a < 5000; ++a) {
    int64_t s = arith::isqrt(a);
    ASSERT_TRUE(s * s <= a && (s + 1) * (s + 1) > a) << a;
  }
  // Around perfect squares where a double square root may be off by one.
  for (int64_t k :
       {int64_t(3037000499), int64_t(3037000498), int64_t(2147483647),
        int64_t(1000000007), int64_t(94906265), int64_t(3037000000)}) {
    EXPECT_EQ(arith::isqrt(k * k), k);
    EXPECT_EQ(arith::isqrt(k * k - 1), k - 1);
    if (k < 3037000499) {
      EXPECT_EQ(arith::isqrt(k * k + 2 * k), k);
    }
  }
  EXPECT_EQ(arith::isqrt(std::numeric_limits<int64_t>::max()), 3037000499);
}

//===----------------------------------------------------------------------===//
// Uniquing
//===----------------------------------------------------------------------===//

TEST_F(ExprTest, LeavesAreUniqued) {
  EXPECT_EQ(ctx.getConst(5), ctx.getConst(5));
  EXPECT_NE(ctx.getConst(5), ctx.getConst(6));
  EXPECT_EQ(ctx.getVar(Var::I), ctx.getVar(Var::I));
  EXPECT_NE(ctx.getVar(Var::I), ctx.getVar(Var::J));
  EXPECT_EQ(ctx.getScalar("w"), ctx.getScalar("w"));
  EXPECT_NE(ctx.getScalar("w"), ctx.getScalar("v"));
  EXPECT_EQ(ctx.getUnionVar(3), ctx.getUnionVar(3));
  EXPECT_NE(ctx.getUnionVar(3), ctx.getUnionVar(4));
  // A scalar and a union variable or constant never collide.
  EXPECT_NE(ctx.getUnionVar(5), ctx.getConst(5));
  const Expr *b = ctx.getVar(Var::B);
  EXPECT_EQ(ctx.getLookup("len", b), ctx.getLookup("len", b));
  EXPECT_NE(ctx.getLookup("len", b), ctx.getLookup("other", b));
  EXPECT_NE(ctx.getSeg("doc", b), ctx.getSegStart("doc", b));
  EXPECT_NE(ctx.getSegStart("doc", b), ctx.getSegEnd("doc", b));
}

TEST_F(ExprTest, NamesAreCopiedIntoTheContext) {
  const Expr *e;
  {
    std::string name = "transient_name";
    e = ctx.getScalar(name);
    name.assign("XXXXXXXXXXXXXX");
  }
  EXPECT_EQ(e->getName(), "transient_name");
  EXPECT_EQ(ctx.getScalar("transient_name"), e);
}

TEST_F(ExprTest, DependsOnJ) {
  E i = B.i(), j = B.j(), w = B.scalar("w");
  EXPECT_TRUE(j->dependsOnJ());
  EXPECT_FALSE(i->dependsOnJ());
  EXPECT_TRUE((i + 2 * j)->dependsOnJ());
  EXPECT_FALSE((i + j - j)->dependsOnJ());
  EXPECT_TRUE(B.min(w, j)->dependsOnJ());
  EXPECT_TRUE(B.seg("doc", j)->dependsOnJ());
  EXPECT_TRUE(B.select(B.lt(j, 3), i, w)->dependsOnJ());
  EXPECT_FALSE(B.select(B.lt(i, 3), i, w)->dependsOnJ());
  EXPECT_TRUE(B.le(j, i)->dependsOnJ());
  EXPECT_FALSE(B.le(i, w)->dependsOnJ());
  EXPECT_TRUE(B.or_({B.le(i, w), B.le(j, i)})->dependsOnJ());
}

//===----------------------------------------------------------------------===//
// Linear forms
//===----------------------------------------------------------------------===//

TEST_F(ExprTest, ConstantsFold) {
  EXPECT_EQ(B.c(2) + B.c(3), B.c(5).e);
  EXPECT_EQ(B.c(2) * B.c(-3), B.c(-6).e);
  EXPECT_EQ(B.c(2) - B.c(3), B.c(-1).e);
  EXPECT_EQ(-B.c(4), B.c(-4).e);
  EXPECT_EQ(B.floordiv(-7, 2), B.c(-4).e);
  EXPECT_EQ(B.mod(-7, 2), B.c(1).e);
  EXPECT_EQ(B.floordiv(7, 0), B.c(0).e);
  EXPECT_EQ(B.mod(7, 0), B.c(0).e);
  EXPECT_EQ(B.isqrt(17), B.c(4).e);
  EXPECT_EQ(B.isqrt(-17), B.c(0).e);
  EXPECT_EQ(B.min(3, 7), B.c(3).e);
  EXPECT_EQ(B.max(3, 7), B.c(7).e);
  EXPECT_TRUE((B.c(2) + B.c(3))->isConst());
  EXPECT_EQ((B.c(2) + B.c(3))->getValue(), 5);
}

TEST_F(ExprTest, SumsAreCanonicalLinearForms) {
  E i = B.i(), j = B.j(), w = B.scalar("w"), k = B.kLen();
  EXPECT_EQ(i + j - j, i.e);
  EXPECT_EQ(j - j, B.c(0).e);
  EXPECT_EQ(2 * (i + 1), 2 * i + 2);
  EXPECT_EQ((i + 1) * 2, 2 * i + 2);
  EXPECT_EQ(i + w, w + i);
  EXPECT_EQ((i + w) + k, i + (w + k));
  EXPECT_EQ((i - w) + (w - i), B.c(0).e);
  EXPECT_EQ(3 * i - i - 2 * i, B.c(0).e);
  EXPECT_EQ(i + i, 2 * i);
  EXPECT_EQ(-(i - w), w - i);
  EXPECT_EQ(0 * i, B.c(0).e);
  EXPECT_EQ(1 * i, i.e);
  EXPECT_EQ(i + 0, i.e);
  EXPECT_EQ(2 * (3 * (i + w) - w), 6 * i + 4 * w);
  // Non-linear terms are opaque terms of the form.
  E m = B.min(i, w);
  EXPECT_EQ(m + i - m, i.e);
  EXPECT_EQ(2 * m + 3 * m, 5 * m);
}

TEST_F(ExprTest, LinearizeAndBack) {
  E i = B.i(), w = B.scalar("w");
  E m = B.max(i, w);
  E e = 3 * i - 2 * w + 4 * m - 7;
  LinearForm form = ctx.linearize(e);
  EXPECT_EQ(form.constant, -7);
  EXPECT_EQ(form.coefficient(i), 3);
  EXPECT_EQ(form.coefficient(w), -2);
  EXPECT_EQ(form.coefficient(m), 4);
  EXPECT_EQ(form.coefficient(B.j()), 0);
  EXPECT_EQ(form.terms.size(), 3u);
  for (size_t k = 1; k < form.terms.size(); ++k)
    EXPECT_LT(form.terms[k - 1].first->getId(), form.terms[k].first->getId());
  for (auto &[t, c] : form.terms)
    EXPECT_NE(c, 0);
  EXPECT_EQ(ctx.fromLinear(form), e.e);
  EXPECT_TRUE(ctx.linearize(B.c(4)).isConstant());
  EXPECT_EQ(ctx.linearize(B.c(4)).constant, 4);
}

TEST_F(ExprTest, ProductsOfNonConstants) {
  E i = B.i(), w = B.scalar("w");
  EXPECT_EQ(i * w, w * i); // commutative operands are sorted
  EXPECT_EQ((i * w)->getKind(), ExprKind::Mul);
  EXPECT_EQ(2 * (i * w) - (w * i), (i * w).e);
}

TEST_F(ExprTest, MinMaxFlattenAndFold) {
  E i = B.i(), w = B.scalar("w"), k = B.kLen();
  E m1 = B.min(B.min(i, w), k);
  E m2 = B.min(i, B.min(w, k));
  E m3 = B.min(k, B.min(w, i));
  EXPECT_EQ(m1, m2.e);
  EXPECT_EQ(m1, m3.e);
  EXPECT_EQ(m1->getKind(), ExprKind::Min);
  EXPECT_EQ(m1->getOperands().size(), 3u);
  EXPECT_EQ(B.min(i, i), i.e);
  EXPECT_EQ(B.max(i, B.max(i, w)), B.max(i, w).e);
  // Constants fold into one operand.
  EXPECT_EQ(B.min(3, B.min(i, 5)), B.min(i, 3).e);
  EXPECT_EQ(B.max(B.max(i, -2), B.max(4, w)), ctx.getMax({i, w, B.c(4)}));
  EXPECT_EQ(ctx.getMin({B.c(9), B.c(2), B.c(5)}), B.c(2).e);
  EXPECT_EQ(ctx.getMax({i}), i.e);
  // Min and max do not flatten into each other.
  E mixed = B.min(B.max(i, w), k);
  EXPECT_EQ(mixed->getKind(), ExprKind::Min);
  EXPECT_EQ(mixed->getOperands().size(), 2u);
}

TEST_F(ExprTest, FloorDivModSelectIsqrtSimplify) {
  E i = B.i(), w = B.scalar("w");
  EXPECT_EQ(B.floordiv(i, 1), i.e);
  EXPECT_EQ(B.floordiv(i, 0), B.c(0).e);
  EXPECT_EQ(B.floordiv(0, i), B.c(0).e);
  EXPECT_EQ(B.mod(i, 1), B.c(0).e);
  EXPECT_EQ(B.mod(i, -1), B.c(0).e);
  EXPECT_EQ(B.mod(i, 0), B.c(0).e);
  EXPECT_EQ(B.floordiv(i, 4)->getKind(), ExprKind::FloorDiv);
  EXPECT_EQ(B.floordiv(i, 4), B.floordiv(i, 4).e);
  EXPECT_EQ(B.mod(i, 4)->getKind(), ExprKind::Mod);
  EXPECT_EQ(B.select(ctx.getTrue(), i, w), i.e);
  EXPECT_EQ(B.select(ctx.getFalse(), i, w), w.e);
  EXPECT_EQ(B.select(B.lt(i, w), i, i), i.e);
  EXPECT_EQ(B.select(B.lt(i, w), i, w)->getKind(), ExprKind::Select);
  EXPECT_EQ(B.isqrt(i)->getKind(), ExprKind::Isqrt);
  // ceil(x / 4) == -floor(-x / 4).
  E cd = E{&ctx, ctx.getCeilDiv(i, 4)};
  TestEnv env;
  for (int64_t v = -20; v <= 20; ++v) {
    env.i = v;
    int64_t expect = -pyFloorDiv(-v, 4);
    EXPECT_EQ(evaluate(cd, env), expect) << v;
    EXPECT_EQ(expect, static_cast<int64_t>(std::ceil(v / 4.0))) << v;
  }
  EXPECT_EQ(ctx.getCeilDiv(B.c(7), 2), B.c(4).e);
  EXPECT_EQ(ctx.getCeilDiv(B.c(-7), 2), B.c(-3).e);
}

//===----------------------------------------------------------------------===//
// Randomized: the simplifying builders preserve values
//===----------------------------------------------------------------------===//

/// A syntax tree built independently of the library, evaluated with the
/// reference semantics; then built through the context and compared.
struct Tree {
  enum Kind {
    Const,
    I,
    W,
    KLen,
    Add,
    Sub,
    Neg,
    Mul,
    Div,
    Mod,
    Min,
    Max,
    Sel,
    Isqrt
  } kind;
  int64_t value = 0;
  std::vector<Tree> ops;
};

Tree randomTree(std::mt19937 &rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  Tree t;
  if (depth == 0 || pick(4) == 0) {
    int k = pick(4);
    t.kind = k == 0   ? Tree::Const
             : k == 1 ? Tree::I
             : k == 2 ? Tree::W
                      : Tree::KLen;
    t.value = pick(13) - 6;
    return t;
  }
  t.kind = static_cast<Tree::Kind>(Tree::Add + pick(10));
  int arity = t.kind == Tree::Neg || t.kind == Tree::Isqrt ? 1
              : t.kind == Tree::Sel                        ? 3
                                                           : 2;
  for (int k = 0; k < arity; ++k)
    t.ops.push_back(randomTree(rng, depth - 1));
  // Keep divisors mostly constant, sometimes zero or negative.
  if ((t.kind == Tree::Div || t.kind == Tree::Mod) && pick(3) != 0) {
    t.ops[1] = Tree{Tree::Const, pick(9) - 4, {}};
  }
  return t;
}

int64_t refEval(const Tree &t, int64_t i, int64_t w, int64_t kLen) {
  auto op = [&](int k) { return refEval(t.ops[k], i, w, kLen); };
  switch (t.kind) {
  case Tree::Const:
    return t.value;
  case Tree::I:
    return i;
  case Tree::W:
    return w;
  case Tree::KLen:
    return kLen;
  case Tree::Add:
    return op(0) + op(1);
  case Tree::Sub:
    return op(0) - op(1);
  case Tree::Neg:
    return -op(0);
  case Tree::Mul:
    return op(0) * op(1);
  case Tree::Div:
    return pyFloorDiv(op(0), op(1));
  case Tree::Mod:
    return pyMod(op(0), op(1));
  case Tree::Min:
    return std::min(op(0), op(1));
  case Tree::Max:
    return std::max(op(0), op(1));
  case Tree::Sel:
    return op(0) < 2 ? op(1) : op(2);
  case Tree::Isqrt: {
    int64_t a = op(0);
    if (a <= 0)
      return 0;
    int64_t s = 0;
    while ((s + 1) * (s + 1) <= a)
      ++s;
    return s;
  }
  }
  return 0;
}

const Expr *build(Builder &B, const Tree &t) {
  auto op = [&](int k) { return E{&B.ctx, build(B, t.ops[k])}; };
  switch (t.kind) {
  case Tree::Const:
    return B.c(t.value);
  case Tree::I:
    return B.i();
  case Tree::W:
    return B.scalar("w");
  case Tree::KLen:
    return B.kLen();
  case Tree::Add:
    return op(0) + op(1);
  case Tree::Sub:
    return op(0) - op(1);
  case Tree::Neg:
    return -op(0);
  case Tree::Mul:
    return op(0) * op(1);
  case Tree::Div:
    return B.floordiv(op(0), op(1));
  case Tree::Mod:
    return B.mod(op(0), op(1));
  case Tree::Min:
    return B.min(op(0), op(1));
  case Tree::Max:
    return B.max(op(0), op(1));
  case Tree::Sel:
    return B.select(B.lt(op(0), 2), op(1), op(2));
  case Tree::Isqrt:
    return B.isqrt(op(0));
  }
  return nullptr;
}

TEST_F(ExprTest, RandomExpressionsKeepTheirValues) {
  std::mt19937 rng(1234);
  TestEnv env;
  for (int trial = 0; trial < 2000; ++trial) {
    Tree t = randomTree(rng, 4);
    const Expr *e = build(B, t);
    // Building twice gives the same pointer.
    ASSERT_EQ(build(B, t), e);
    for (int64_t i : {-3, 0, 2, 7})
      for (int64_t w : {-5, -1, 0, 3})
        for (int64_t k : {0, 4, 9}) {
          env.i = i;
          env.kLen = k;
          env.scalars["w"] = w;
          ASSERT_EQ(evaluate(e, env), refEval(t, i, w, k))
              << e->str() << " at i=" << i << " w=" << w << " k_len=" << k;
        }
  }
}

//===----------------------------------------------------------------------===//
// Predicates
//===----------------------------------------------------------------------===//

TEST_F(ExprTest, ComparisonsFoldWhenTheDifferenceIsConstant) {
  E i = B.i(), j = B.j(), w = B.scalar("w");
  EXPECT_TRUE(B.lt(i, i + 1)->isTrue());
  EXPECT_TRUE(B.le(i + 1, i)->isFalse());
  EXPECT_TRUE(B.eq(i + w - w, i)->isTrue());
  EXPECT_TRUE(B.ne(j, j)->isFalse());
  EXPECT_TRUE(B.ge(2 * (i + 1), 2 * i + 2)->isTrue());
  EXPECT_TRUE(B.gt(3, 2)->isTrue());
  EXPECT_TRUE(B.gt(2, 3)->isFalse());
  const Pred *p = B.le(j, i);
  EXPECT_EQ(p->getKind(), PredKind::Cmp);
  EXPECT_EQ(p, B.le(j, i));
  EXPECT_NE(p, B.ge(i, j)); // not canonicalized across operand order
  EXPECT_EQ(p->getLHS(), j.e);
  EXPECT_EQ(p->getRHS(), i.e);
  EXPECT_EQ(p->getCmpKind(), CmpKind::LE);
}

TEST_F(ExprTest, ConstantComparisonsFoldLikeTheyEvaluate) {
  // 64-bit comparisons do not wrap: INT64_MIN < 1 even though
  // INT64_MIN - 1 wraps to INT64_MAX.
  const int64_t mn = std::numeric_limits<int64_t>::min();
  const int64_t mx = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> values = {mn, mn + 1, -1, 0, 1, mx - 1, mx};
  for (int64_t a : values)
    for (int64_t b : values) {
      EXPECT_EQ(B.lt(a, b)->isTrue(), a < b) << a << " < " << b;
      EXPECT_EQ(B.le(a, b)->isTrue(), a <= b) << a << " <= " << b;
      EXPECT_EQ(B.gt(a, b)->isTrue(), a > b) << a << " > " << b;
      EXPECT_EQ(B.ge(a, b)->isTrue(), a >= b) << a << " >= " << b;
      EXPECT_EQ(B.eq(a, b)->isTrue(), a == b) << a << " == " << b;
      EXPECT_EQ(B.ne(a, b)->isTrue(), a != b) << a << " != " << b;
    }
}

TEST_F(ExprTest, CmpKindHelpers) {
  for (CmpKind k : {CmpKind::EQ, CmpKind::NE, CmpKind::LT, CmpKind::LE,
                    CmpKind::GT, CmpKind::GE}) {
    EXPECT_EQ(negate(negate(k)), k);
    EXPECT_EQ(swapOperands(swapOperands(k)), k);
    for (int64_t a = -2; a <= 2; ++a)
      for (int64_t b = -2; b <= 2; ++b) {
        bool v = B.cmp(k, a, b)->isTrue();
        EXPECT_EQ(B.cmp(negate(k), a, b)->isTrue(), !v);
        EXPECT_EQ(B.cmp(swapOperands(k), b, a)->isTrue(), v);
      }
  }
  EXPECT_EQ(spelling(CmpKind::LE), "<=");
  EXPECT_EQ(spelling(CmpKind::NE), "!=");
}

TEST_F(ExprTest, AndOrFlattenDedupeAndDropNeutralElements) {
  E i = B.i(), w = B.scalar("w"), k = B.kLen();
  const Pred *a = B.lt(i, w), *b = B.lt(i, k), *c = B.ge(w, 0);
  const Pred *t = ctx.getTrue(), *f = ctx.getFalse();
  EXPECT_EQ(B.and_({a, B.and_({b, c})}), B.and_({c, b, a}));
  EXPECT_EQ(B.and_({a, B.and_({b, c})})->getOperands().size(), 3u);
  EXPECT_EQ(B.or_({B.or_({a, b}), c}), B.or_({c, a, b}));
  EXPECT_EQ(B.and_({a, a}), a);
  EXPECT_EQ(B.and_({a, t}), a);
  EXPECT_EQ(B.and_({a, f}), f);
  EXPECT_EQ(B.or_({a, f}), a);
  EXPECT_EQ(B.or_({a, t}), t);
  EXPECT_EQ(B.and_({}), t);
  EXPECT_EQ(B.or_({}), f);
  // And and or do not flatten into each other.
  const Pred *mixed = B.and_({a, B.or_({b, c})});
  EXPECT_EQ(mixed->getKind(), PredKind::And);
  EXPECT_EQ(mixed->getOperands().size(), 2u);
}

TEST_F(ExprTest, NotSimplifies) {
  E i = B.i(), w = B.scalar("w");
  const Pred *a = B.lt(i, w);
  EXPECT_EQ(B.not_(ctx.getTrue()), ctx.getFalse());
  EXPECT_EQ(B.not_(ctx.getFalse()), ctx.getTrue());
  EXPECT_EQ(B.not_(a), B.ge(i, w)); // comparisons negate in place
  const Pred *conj = B.and_({a, B.gt(i, 0)});
  const Pred *n = B.not_(conj);
  EXPECT_EQ(n->getKind(), PredKind::Not);
  EXPECT_EQ(B.not_(n), conj); // double negation
}

TEST_F(ExprTest, AnyWithEmptyRangeIsFalse) {
  E j = B.j(), d = B.d(0);
  EXPECT_TRUE(B.any(0, 3, 2, B.eq(j, d))->isFalse());
  const Pred *any = B.any(0, -1, 1, B.eq(j, d));
  EXPECT_EQ(any->getKind(), PredKind::Any);
  EXPECT_EQ(any->getLower(), -1);
  EXPECT_EQ(any->getUpper(), 1);
  EXPECT_EQ(any->getUnionVar(), 0);
  EXPECT_EQ(any->getBody(), B.eq(j, d));
  EXPECT_TRUE(any->dependsOnJ());
}

//===----------------------------------------------------------------------===//
// Substitution and origins
//===----------------------------------------------------------------------===//

TEST_F(ExprTest, SubstituteReplacesAndResimplifies) {
  E i = B.i(), j = B.j(), d = B.d(1), e = B.d(2);
  EXPECT_EQ(ctx.substitute(i + d, 1, 3), i + 3);
  EXPECT_EQ(ctx.substitute(d * d - 4, 1, 2), B.c(0).e);
  EXPECT_EQ(ctx.substitute(B.isqrt(25 - d * d), 1, 3), B.c(4).e);
  EXPECT_EQ(ctx.substitute(i + e, 1, 3), (i + e).e); // other variables stay
  EXPECT_EQ(ctx.substitute(B.min(d, i), 1, -2), B.min(i, -2).e);
  // Predicates re-fold: `d*d <= 4` at d = 3 is false.
  EXPECT_TRUE(ctx.substitute(B.le(d * d, 4), 1, 3)->isFalse());
  EXPECT_EQ(ctx.substitute(B.and_({B.le(d * d, 4), B.le(j, i + d)}), 1, 1),
            B.le(j, i + 1));
}

TEST_F(ExprTest, OriginsAreRecordedAndInherited) {
  E i = B.i(), j = B.j();
  int tag1 = 0, tag2 = 0;
  const Pred *p = B.le(j, i);
  EXPECT_EQ(ctx.getOrigin(p), nullptr);
  ctx.setOrigin(p, &tag1);
  EXPECT_EQ(ctx.getOrigin(p), &tag1);
  ctx.setOrigin(p, &tag2); // setOrigin replaces
  EXPECT_EQ(ctx.getOrigin(p), &tag2);
  ctx.setOrigin(p, nullptr); // a null origin is ignored
  EXPECT_EQ(ctx.getOrigin(p), &tag2);
  // Negation inherits.
  EXPECT_EQ(ctx.getOrigin(B.not_(p)), &tag2);
  const Pred *q = B.lt(i, 3);
  ctx.inheritOrigin(q, p);
  EXPECT_EQ(ctx.getOrigin(q), &tag2);
  // Inheriting never overrides an origin the predicate already has.
  const Pred *r = B.lt(i, 4);
  ctx.setOrigin(r, &tag1);
  ctx.inheritOrigin(r, p);
  EXPECT_EQ(ctx.getOrigin(r), &tag1);
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

TEST_F(ExprTest, ConstantArithmeticOverflowIsRecorded) {
  E j = B.j();
  const Expr *big = ctx.getConst(INT32_MAX);
  (void)(j * 3); // small coefficients: no overflow
  EXPECT_FALSE(ctx.hasOverflowed());
  const Expr *cube = ctx.getMul(ctx.getMul(big, big), big); // > 2^63
  EXPECT_TRUE(ctx.hasOverflowed());
  EXPECT_TRUE(cube->isConst());
}

TEST_F(ExprTest, NormalizeRejectsOverflowingCoefficients) {
  ExprContext fresh;
  const Expr *big = fresh.getConst(INT32_MAX);
  const Expr *coeff = fresh.getMul(fresh.getMul(big, big), big);
  const Pred *atom =
      fresh.getCmp(CmpKind::LE, fresh.getMul(fresh.getVar(Var::J), coeff),
                   fresh.getVar(Var::I));
  auto dnf = normalizeRule(fresh, atom);
  ASSERT_FALSE(static_cast<bool>(dnf));
  std::string message = llvm::toString(dnf.takeError());
  EXPECT_NE(message.find("overflows 64-bit"), std::string::npos) << message;
}

TEST_F(ExprTest, Printing) {
  E i = B.i(), j = B.j(), w = B.scalar("w");
  EXPECT_EQ(i.e->str(), "i");
  EXPECT_EQ(B.c(-3)->str(), "-3");
  EXPECT_EQ((i - w)->str(), "i - w");
  EXPECT_EQ((i + 1)->str(), "i + 1");
  EXPECT_EQ((i - 1)->str(), "i - 1");
  EXPECT_EQ((2 * i - 3 * w + 4)->str(), "2*i - 3*w + 4");
  EXPECT_EQ((7 - i)->str(), "-i + 7");
  EXPECT_EQ(B.max(B.c(0), i - w)->str().find("max("), 0u);
  EXPECT_EQ(B.floordiv(i + 3, 5)->str(), "(i + 3) floordiv 5");
  EXPECT_EQ(B.mod(j, 3)->str(), "j mod 3");
  EXPECT_EQ(B.seg("doc", j)->str(), "seg(doc, j)");
  EXPECT_EQ(B.lookup("len", B.b())->str(), "len[b]");
  EXPECT_EQ(B.isqrt(i)->str(), "isqrt(i)");
  EXPECT_EQ(B.le(j, i)->str(), "j <= i");
  EXPECT_EQ(B.qLen()->str(), "q_len");
  EXPECT_EQ(B.kLen()->str(), "k_len");
  EXPECT_EQ(ctx.getTrue()->str(), "true");
}

} // namespace
