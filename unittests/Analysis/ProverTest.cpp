//===- ProverTest.cpp - The linear prover ---------------------------------===//

#include "cmask/Analysis/Prover.h"

#include "TestUtil.h"

#include <functional>
#include <random>

using namespace cmask;
using namespace cmask::test;

namespace {

class ProverTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
  E i = B.i(), c = B.scalar("c"), a = B.scalar("a"), b = B.scalar("b"),
    x = B.scalar("x");

  Prover none() { return Prover(ctx, {}); }
};

TEST_F(ProverTest, TrivialFacts) {
  Prover p = none();
  EXPECT_TRUE(p.proveLE(i, i));
  EXPECT_TRUE(p.proveLE(i, i + 1));
  EXPECT_TRUE(p.proveLT(i, i + 1));
  EXPECT_FALSE(p.proveLT(i, i));
  EXPECT_FALSE(p.proveLE(i + 1, i));
  EXPECT_TRUE(p.proveLE(2 * i - i, i));
  EXPECT_TRUE(p.proveLE(B.c(3), B.c(5)));
  EXPECT_FALSE(p.proveLE(B.c(5), B.c(3)));
}

TEST_F(ProverTest, DoesNotProveWithoutFacts) {
  Prover p = none();
  EXPECT_FALSE(p.proveLE(i, c));
  EXPECT_FALSE(p.proveLE(c, i));
  EXPECT_FALSE(p.proveLE(c, i + 1));
  EXPECT_FALSE(p.proveLE(B.c(0), i));
  EXPECT_FALSE(p.proveLE(a, b));
}

TEST_F(ProverTest, UsesFacts) {
  Prover p(ctx, {B.ge(i, c)});
  EXPECT_TRUE(p.proveLE(c, i));
  EXPECT_TRUE(p.proveLE(c, i + 1));
  EXPECT_TRUE(p.proveLT(c, i + 1));
  EXPECT_TRUE(p.proveLE(c - 5, i));
  EXPECT_FALSE(p.proveLT(c, i));
  EXPECT_FALSE(p.proveLE(i, c));
  // Chains of facts.
  Prover chain(ctx, {B.le(a, b), B.lt(b, c), B.le(c, i)});
  EXPECT_TRUE(chain.proveLT(a, i));
  EXPECT_TRUE(chain.proveLE(a + 1, i));
  EXPECT_FALSE(chain.proveLE(a + 2, i));
  // Equalities count both ways; disequalities give nothing.
  Prover eq(ctx, {B.eq(a, i + 2)});
  EXPECT_TRUE(eq.proveLE(a, i + 2));
  EXPECT_TRUE(eq.proveLE(i + 2, a));
  Prover ne(ctx, {B.ne(a, b)});
  EXPECT_FALSE(ne.proveLT(a, b));
  EXPECT_FALSE(ne.proveLT(b, a));
  // Conjunctions are split; disjunctions are ignored (sound).
  Prover conj(ctx, {B.and_({B.ge(i, c), B.ge(c, 3)})});
  EXPECT_TRUE(conj.proveLE(B.c(3), i));
  Prover disj(ctx, {B.or_({B.ge(i, 3), B.ge(i, 4)})});
  EXPECT_FALSE(disj.proveLE(B.c(3), i));
}

TEST_F(ProverTest, ExtraFacts) {
  Prover p = none();
  EXPECT_FALSE(p.proveLE(c, i + 1));
  EXPECT_TRUE(p.proveLE(c, i + 1, {B.ge(i, c)}));
  EXPECT_TRUE(p.proveLT(c, i + 1, {B.ge(i, c)}));
  // Extra facts do not stick.
  EXPECT_FALSE(p.proveLE(c, i + 1));
}

TEST_F(ProverTest, IntegerTightening) {
  // 1 <= 2*i <= 1 has rational solutions only.
  Prover p = none();
  EXPECT_TRUE(p.proveInfeasible({B.ge(2 * i, 1), B.le(2 * i, 1)}));
  // 3*a >= 1 implies a >= 1 over the integers.
  Prover q(ctx, {B.ge(3 * a, 1)});
  EXPECT_TRUE(q.proveLE(B.c(1), a));
  EXPECT_FALSE(q.proveLE(B.c(2), a));
}

TEST_F(ProverTest, NonLinearTermsAndTheirDefinitions) {
  Prover p = none();
  E m = B.min(a, b), M = B.max(a, b);
  EXPECT_TRUE(p.proveLE(m, a));
  EXPECT_TRUE(p.proveLE(m, b));
  EXPECT_TRUE(p.proveLE(a, M));
  EXPECT_TRUE(p.proveLE(m, M));
  EXPECT_FALSE(p.proveLE(a, m));
  EXPECT_FALSE(p.proveLE(M, a));
  EXPECT_TRUE(p.proveLE(ctx.getMin({a, b, i}), B.max(c, a)));
  // Floor division by a positive constant.
  E q = B.floordiv(x, 4);
  EXPECT_TRUE(p.proveLE(q * 4, x));
  EXPECT_TRUE(p.proveLE(4 * q, x));
  EXPECT_TRUE(p.proveLT(x, 4 * q + 4));
  EXPECT_TRUE(p.proveLE(x - 3, 4 * q));
  EXPECT_FALSE(p.proveLE(x, 4 * q));
  EXPECT_FALSE(p.proveLE(x - 2, 4 * q - 1));
  // Mod by a positive constant.
  E r = B.mod(x, 5);
  EXPECT_TRUE(p.proveLE(B.c(0), r));
  EXPECT_TRUE(p.proveLE(r, B.c(4)));
  EXPECT_FALSE(p.proveLE(r, B.c(3)));
  // isqrt is non-negative.
  EXPECT_TRUE(p.proveLE(B.c(0), B.isqrt(x)));
  EXPECT_FALSE(p.proveLE(B.isqrt(x), x));
  // Opaque terms are just unknowns.
  EXPECT_FALSE(p.proveLE(B.lookup("len", B.b()), B.c(100)));
  EXPECT_FALSE(p.proveLE(a * b, a));
  EXPECT_TRUE(p.proveLE(a * b, a * b + 1));
}

TEST_F(ProverTest, SegmentFacts) {
  Prover p(ctx, Prover::domainFacts(ctx));
  E s = B.seg("doc", i);
  E start = B.segStart("doc", s), end = B.segEnd("doc", s);
  EXPECT_TRUE(p.proveLE(start, i));
  EXPECT_TRUE(p.proveLT(i, end));
  EXPECT_TRUE(p.proveLE(start, end));
  EXPECT_TRUE(p.proveLE(B.c(0), start));
  EXPECT_TRUE(p.proveLE(B.c(0), s));
  EXPECT_TRUE(p.proveLE(B.min(end, i + 1), i + 1));
  EXPECT_TRUE(p.proveLE(i + 1, end));
  EXPECT_FALSE(p.proveLE(end, i + 1));
  EXPECT_FALSE(p.proveLE(i + 2, end)); // i may be the last of its segment
  EXPECT_FALSE(p.proveLE(start, B.c(0)));
  EXPECT_FALSE(p.proveLT(start, i));
  // Only for the segment of i itself, and of the same offsets.
  EXPECT_FALSE(p.proveLE(B.segStart("other", s), i));
  EXPECT_FALSE(p.proveLE(B.segStart("doc", B.seg("doc", i + 1)), i));
}

TEST_F(ProverTest, Infeasibility) {
  Prover p(ctx, Prover::domainFacts(ctx));
  EXPECT_TRUE(p.proveInfeasible({B.lt(i, 0)}));
  EXPECT_TRUE(p.proveInfeasible({B.ge(i, B.qLen())}));
  EXPECT_TRUE(p.proveInfeasible({ctx.getFalse()}));
  EXPECT_TRUE(p.proveInfeasible({B.lt(i, c), B.ge(i, c + 1)}));
  EXPECT_TRUE(p.proveInfeasible({B.lt(B.kLen(), 0)}));
  EXPECT_FALSE(p.proveInfeasible({}));
  EXPECT_FALSE(p.proveInfeasible({B.ge(i, 0)}));
  EXPECT_FALSE(p.proveInfeasible({B.lt(i, c)}));
  EXPECT_TRUE(p.proveInfeasible({B.lt(i, c), B.ge(i, c)}));
}

TEST_F(ProverTest, DomainFacts) {
  auto facts = Prover::domainFacts(ctx);
  Prover p(ctx, facts);
  EXPECT_TRUE(p.proveLE(B.c(0), i));
  EXPECT_TRUE(p.proveLT(i, B.qLen()));
  EXPECT_TRUE(p.proveLE(B.c(1), B.qLen()));
  EXPECT_TRUE(p.proveLE(B.c(0), B.kLen()));
  EXPECT_TRUE(p.proveLE(B.c(0), B.b()));
  EXPECT_FALSE(p.proveLE(B.c(1), B.kLen()));
  EXPECT_FALSE(p.proveLE(i, B.kLen()));
  // They hold on concrete rows.
  TestEnv env;
  for (int64_t q = 1; q < 4; ++q)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t row = 0; row < q; ++row) {
        env.qLen = q;
        env.kLen = k;
        env.i = row;
        env.b = 2;
        for (const Pred *f : facts)
          EXPECT_TRUE(evaluate(f, env)) << f->str();
      }
}

/// Randomized soundness: whatever the prover proves about small linear and
/// min/max/floordiv expressions holds on every point of a grid that
/// satisfies the facts.
TEST_F(ProverTest, RandomizedSoundness) {
  std::mt19937 rng(4242);
  auto pick = [&](int n) { return static_cast<int64_t>(rng() % n); };
  std::function<E(int)> gen = [&](int depth) -> E {
    if (depth == 0 || pick(3) == 0) {
      switch (pick(4)) {
      case 0:
        return B.c(pick(9) - 4);
      case 1:
        return i;
      case 2:
        return a;
      default:
        return c;
      }
    }
    E l = gen(depth - 1), r = gen(depth - 1);
    switch (pick(6)) {
    case 0:
      return l + r;
    case 1:
      return l - r;
    case 2:
      return B.min(l, r);
    case 3:
      return B.max(l, r);
    case 4:
      return B.floordiv(l, pick(3) + 2);
    default:
      return (pick(5) - 2) * l + pick(3);
    }
  };
  TestEnv env;
  int proved = 0;
  for (int trial = 0; trial < 400; ++trial) {
    llvm::SmallVector<const Pred *, 4> facts;
    for (int k = pick(3); k > 0; --k)
      facts.push_back(B.cmp(static_cast<CmpKind>(pick(6)), gen(1), gen(1)));
    Prover p(ctx, facts);
    E lhs = gen(2), rhs = gen(2);
    bool le = p.proveLE(lhs, rhs), lt = p.proveLT(lhs, rhs);
    bool infeasible = p.proveInfeasible({B.gt(lhs, rhs)});
    proved += le + lt;
    if (!le && !lt && !infeasible)
      continue;
    for (int64_t iv = -6; iv <= 6; ++iv)
      for (int64_t av = -6; av <= 6; ++av)
        for (int64_t cv = -6; cv <= 6; ++cv) {
          env.i = iv;
          env.scalars["a"] = av;
          env.scalars["c"] = cv;
          if (!llvm::all_of(facts,
                            [&](const Pred *f) { return evaluate(f, env); }))
            continue;
          int64_t l = evaluate(lhs, env), r = evaluate(rhs, env);
          if (le || infeasible) {
            ASSERT_LE(l, r) << lhs->str() << " <= " << rhs->str();
          }
          if (lt) {
            ASSERT_LT(l, r) << lhs->str() << " < " << rhs->str();
          }
        }
  }
  EXPECT_GT(proved, 20); // the test exercises actual proofs
}

/// Randomized soundness over segment terms of row i, with the domain facts,
/// checked on sorted offsets within [0, L] (empty segments included).
TEST_F(ProverTest, RandomizedSoundnessWithSegments) {
  std::mt19937 rng(31337);
  auto pick = [&](int n) { return static_cast<int64_t>(rng() % n); };
  E s = B.seg("doc", i);
  std::vector<E> leaves = {i,
                           s,
                           B.segStart("doc", s),
                           B.segEnd("doc", s),
                           B.segStart("doc", s + 1),
                           B.segEnd("doc", s - 1),
                           B.qLen(),
                           B.kLen(),
                           B.c(0),
                           B.c(1),
                           B.c(3)};
  std::function<E(int)> gen = [&](int depth) -> E {
    if (depth == 0 || pick(2) == 0)
      return leaves[pick(leaves.size())];
    E l = gen(depth - 1), r = gen(depth - 1);
    switch (pick(4)) {
    case 0:
      return l + r;
    case 1:
      return l - r + pick(3) - 1;
    case 2:
      return B.min(l, r);
    default:
      return B.max(l, r);
    }
  };
  std::vector<TestEnv> envs;
  for (auto offs : std::vector<std::vector<int64_t>>{
           {}, {0}, {3}, {0, 3, 3, 7}, {2, 2, 5, 9, 10}, {10}, {1, 2, 3, 4}})
    for (auto [q, k] : std::vector<std::pair<int64_t, int64_t>>{
             {10, 10}, {6, 10}, {10, 4}, {1, 10}}) {
      TestEnv env;
      env.qLen = q;
      env.kLen = k;
      env.offs["doc"] = offs;
      envs.push_back(env);
    }
  int proved = 0;
  auto domain = Prover::domainFacts(ctx);
  for (int trial = 0; trial < 600; ++trial) {
    llvm::SmallVector<const Pred *, 6> facts(domain.begin(), domain.end());
    if (pick(2))
      facts.push_back(B.cmp(static_cast<CmpKind>(pick(6)), gen(1), gen(1)));
    Prover p(ctx, facts);
    E lhs = gen(2), rhs = gen(2);
    bool le = p.proveLE(lhs, rhs), lt = p.proveLT(lhs, rhs);
    proved += le + lt;
    if (!le && !lt)
      continue;
    for (TestEnv env : envs)
      for (env.i = 0; env.i < env.qLen; ++env.i) {
        if (!llvm::all_of(facts,
                          [&](const Pred *f) { return evaluate(f, env); }))
          continue;
        int64_t l = evaluate(lhs, env), r = evaluate(rhs, env);
        if (le) {
          ASSERT_LE(l, r) << lhs->str() << " <= " << rhs->str()
                          << " at i=" << env.i;
        }
        if (lt) {
          ASSERT_LT(l, r) << lhs->str() << " < " << rhs->str()
                          << " at i=" << env.i;
        }
      }
  }
  EXPECT_GT(proved, 50);
}

} // namespace
