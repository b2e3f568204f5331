//===- NormalizeTest.cpp - Unions, NNF, j isolation and DNF ---------------===//

#include "TestUtil.h"

#include <chrono>
#include <functional>
#include <limits>
#include <random>
#include <set>

using namespace cmask;
using namespace cmask::test;

namespace {

class NormalizeTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
  E i = B.i(), j = B.j(), w = B.scalar("w"), c = B.scalar("c");
};

/// Environments over which predicates in i, j, w, c are compared.
std::vector<TestEnv> scalarEnvs() {
  std::vector<TestEnv> envs;
  for (int64_t w : {-2, 0, 3, 10})
    for (int64_t c : {-4, 0, 5, 17}) {
      TestEnv env;
      env.qLen = env.kLen = 40;
      env.scalars["w"] = w;
      env.scalars["c"] = c;
      envs.push_back(env);
    }
  return envs;
}

/// Environments with offsets "doc" (sorted, within [0, L], with empty
/// segments, boundaries at 0 and at L) for predicates using segments.
std::vector<TestEnv> segmentEnvs() {
  std::vector<std::vector<int64_t>> docs = {{},
                                            {0},
                                            {3},
                                            {0, 3, 3, 7},
                                            {2, 2, 5, 9, 12},
                                            {5, 5, 5},
                                            {12},
                                            {0, 0, 1, 2, 3, 4, 11, 12, 12}};
  std::vector<std::pair<int64_t, int64_t>> lens = {{12, 12}, {8, 12}, {12, 7}};
  std::vector<TestEnv> envs;
  for (auto &doc : docs)
    for (auto [q, k] : lens) {
      TestEnv env;
      env.qLen = q;
      env.kLen = k;
      env.offs["doc"] = doc;
      env.scalars["w"] = 2;
      env.scalars["c"] = 3;
      envs.push_back(env);
    }
  return envs;
}

/// `a` and `b` agree at every (i, j) of the given ranges in every env.
::testing::AssertionResult agreeOn(const Pred *a, const Pred *b,
                                   const std::vector<TestEnv> &envs,
                                   int64_t iLo, int64_t iHi, int64_t jLo,
                                   int64_t jHi) {
  for (TestEnv env : envs)
    for (int64_t i = iLo; i < iHi; ++i)
      for (int64_t j = jLo; j < jHi; ++j) {
        env.i = i;
        env.j = j;
        bool va = evaluate(a, env), vb = evaluate(b, env);
        if (va != vb)
          return ::testing::AssertionFailure()
                 << "`" << a->str() << "` is " << va << " but `" << b->str()
                 << "` is " << vb << " at i=" << i << " j=" << j
                 << " w=" << env.scalars.lookup("w")
                 << " c=" << env.scalars.lookup("c") << " q_len=" << env.qLen
                 << " k_len=" << env.kLen;
      }
  return ::testing::AssertionSuccess();
}

/// Same, with i in [0, q_len) and j in [0, k_len) of each env.
::testing::AssertionResult agreeOnRows(const Pred *a, const Pred *b,
                                       const std::vector<TestEnv> &envs) {
  for (const TestEnv &env : envs)
    if (auto r = agreeOn(a, b, {env}, 0, env.qLen, 0, env.kLen); !r)
      return r;
  return ::testing::AssertionSuccess();
}

//===----------------------------------------------------------------------===//
// Unions
//===----------------------------------------------------------------------===//

TEST_F(NormalizeTest, UnrollSubstitutesTheUnionVariable) {
  E d = B.d(0);
  const Pred *any = B.any(0, -2, 2, B.eq(j, i + d));
  ASSERT_OK_AND_ASSIGN(const Pred *unrolled, unrollUnions(ctx, any));
  EXPECT_FALSE(mentionsUnionVar(unrolled));
  ASSERT_EQ(unrolled->getKind(), PredKind::Or);
  std::set<const Pred *> ops(unrolled->getOperands().begin(),
                             unrolled->getOperands().end());
  std::set<const Pred *> expect;
  for (int64_t v = -2; v <= 2; ++v)
    expect.insert(B.eq(j, i + v));
  EXPECT_EQ(ops, expect);
  EXPECT_TRUE(agreeOn(any, unrolled, scalarEnvs(), -3, 20, -3, 20));
}

TEST_F(NormalizeTest, UnrollFoldsConstantConditionsOfEachCopy) {
  // CLEAR-style body: a copy is kept only where d*d <= 4, i.e. d in [-2, 2].
  E d = B.d(7);
  const Pred *body = B.and_({B.le(d * d, 4), B.ge(j, i + d),
                             B.lt(j, i + d + B.isqrt(4 - d * d) + 1)});
  const Pred *any = B.any(7, -4, 4, body);
  ASSERT_OK_AND_ASSIGN(const Pred *unrolled, unrollUnions(ctx, any));
  EXPECT_FALSE(mentionsUnionVar(unrolled));
  ASSERT_EQ(unrolled->getKind(), PredKind::Or);
  EXPECT_EQ(unrolled->getOperands().size(), 5u);
  EXPECT_TRUE(agreeOn(any, unrolled, scalarEnvs(), -3, 20, -3, 20));
}

TEST_F(NormalizeTest, UnrollNestedAndNegatedUnions) {
  E d1 = B.d(1), d2 = B.d(2);
  const Pred *inner = B.any(2, 0, 1, B.eq(j, i + 3 * d1 + d2));
  const Pred *rule =
      B.and_({B.any(1, 0, 2, inner), B.not_(B.any(3, 0, 1, B.eq(j, B.d(3))))});
  ASSERT_OK_AND_ASSIGN(const Pred *unrolled, unrollUnions(ctx, rule));
  EXPECT_FALSE(mentionsUnionVar(unrolled));
  EXPECT_TRUE(agreeOn(rule, unrolled, scalarEnvs(), -3, 20, -3, 20));
}

TEST_F(NormalizeTest, UnrollSizeLimit) {
  int tag = 0;
  NormalizeOptions opts;
  opts.maxUnrolledAtoms = 10;
  E d = B.d(0);
  const Pred *ok = B.any(0, 0, 9, B.eq(j, i + d));
  ASSERT_OK_AND_ASSIGN(const Pred *unrolled, unrollUnions(ctx, ok, opts));
  EXPECT_EQ(unrolled->getOperands().size(), 10u);

  const Pred *tooBig = B.any(0, 0, 10, B.eq(j, i + d));
  ctx.setOrigin(tooBig, &tag);
  CaughtError err = expectError(unrollUnions(ctx, tooBig, opts));
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_NE(err.message.find("10"), std::string::npos) << err.message;
  EXPECT_EQ(err.origin, &tag);
  // normalizeRule applies the same limit.
  EXPECT_TRUE(expectError(normalizeRule(ctx, tooBig, opts)).isAnalysisError);
}

TEST_F(NormalizeTest, UnrollSizeLimitCountsAtomsOfNestedUnions) {
  // 10 x 10 copies of one atom: 100 atoms, over a limit of 50, although
  // each union alone has only 10 copies.
  NormalizeOptions opts;
  opts.maxUnrolledAtoms = 50;
  const Pred *inner = B.any(2, 0, 9, B.eq(j, 10 * B.d(1) + B.d(2)));
  const Pred *outer = B.any(1, 0, 9, inner);
  CaughtError err = expectError(unrollUnions(ctx, outer, opts));
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_NE(err.message.find("50"), std::string::npos) << err.message;
  // A body with several atoms counts each of them.
  const Pred *wide = B.any(
      1, 0, 19,
      B.or_({B.eq(j, i + B.d(1)), B.eq(j, i - B.d(1)), B.eq(j, w + B.d(1))}));
  EXPECT_TRUE(expectError(unrollUnions(ctx, wide, opts)).isAnalysisError);
  // Exactly at the limit is fine; the result has the 100 atoms.
  opts.maxUnrolledAtoms = 99;
  EXPECT_TRUE(expectError(unrollUnions(ctx, outer, opts)).isAnalysisError);
  opts.maxUnrolledAtoms = 100;
  ASSERT_OK_AND_ASSIGN(const Pred *fine, unrollUnions(ctx, outer, opts));
  EXPECT_FALSE(mentionsUnionVar(fine));
  ASSERT_EQ(fine->getKind(), PredKind::Or);
  EXPECT_EQ(fine->getOperands().size(), 100u);
  // Sibling unions add up.
  const Pred *twice = B.and_({B.any(3, 0, 59, B.eq(j, i + B.d(3))),
                              B.any(4, 0, 59, B.eq(j, w + B.d(4)))});
  EXPECT_TRUE(expectError(unrollUnions(ctx, twice, opts)).isAnalysisError);
  opts.maxUnrolledAtoms = 120;
  ASSERT_OK_AND_ASSIGN(const Pred *both, unrollUnions(ctx, twice, opts));
  EXPECT_FALSE(mentionsUnionVar(both));
}

TEST_F(NormalizeTest, HugeUnionFailsQuickly) {
  const Pred *huge = B.any(0, 0, int64_t(1) << 40, B.eq(j, i + B.d(0)));
  auto start = std::chrono::steady_clock::now();
  CaughtError err = expectError(unrollUnions(ctx, huge));
  // Also the extreme bounds, and deep nests of moderate unions.
  const Pred *extreme =
      B.any(1, std::numeric_limits<int64_t>::min(),
            std::numeric_limits<int64_t>::max(), B.eq(j, B.d(1)));
  EXPECT_TRUE(expectError(unrollUnions(ctx, extreme)).isAnalysisError);
  const Pred *nest = B.eq(j, B.d(10) + B.d(11) + B.d(12) + B.d(13) + B.d(14));
  for (int64_t v = 10; v < 15; ++v)
    nest = B.any(v, 0, 99, nest);
  EXPECT_TRUE(expectError(unrollUnions(ctx, nest)).isAnalysisError);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_LT(secs, 2.0);
}

//===----------------------------------------------------------------------===//
// NNF
//===----------------------------------------------------------------------===//

TEST_F(NormalizeTest, NNFPushesNotIntoComparisons) {
  const Pred *a = B.le(j, i), *b = B.lt(i, w), *cc = B.ge(j, c);
  EXPECT_EQ(toNNF(ctx, B.not_(a)), B.gt(j, i));
  EXPECT_EQ(toNNF(ctx, a), a);
  // not (a and b) == not a or not b
  EXPECT_EQ(toNNF(ctx, B.not_(B.and_({a, b}))),
            B.or_({B.gt(j, i), B.ge(i, w)}));
  // not (a or b) == not a and not b
  EXPECT_EQ(toNNF(ctx, B.not_(B.or_({a, b}))),
            B.and_({B.gt(j, i), B.ge(i, w)}));
  // Nested: not (a and (b or not c)) == not a or (not b and c)
  const Pred *p = B.not_(B.and_({a, B.or_({b, B.not_(B.and_({cc, b}))})}));
  const Pred *n = toNNF(ctx, p);
  EXPECT_TRUE(isNNF(n)) << n->str();
  EXPECT_EQ(n, B.or_({B.gt(j, i), B.and_({B.ge(i, w), cc, b})}));
  EXPECT_TRUE(agreeOn(p, n, scalarEnvs(), -3, 20, -3, 20));
  // Every comparison kind negates exactly.
  for (CmpKind k : {CmpKind::EQ, CmpKind::NE, CmpKind::LT, CmpKind::LE,
                    CmpKind::GT, CmpKind::GE}) {
    const Pred *atom = B.cmp(k, j, i + w);
    const Pred *neg = toNNF(ctx, B.not_(B.and_({atom, B.lt(i, c)})));
    EXPECT_TRUE(isNNF(neg));
    EXPECT_TRUE(agreeOn(B.not_(B.and_({atom, B.lt(i, c)})), neg, scalarEnvs(),
                        -3, 20, -3, 20));
  }
  EXPECT_EQ(toNNF(ctx, B.not_(ctx.getTrue())), ctx.getFalse());
}

//===----------------------------------------------------------------------===//
// isolateJ: exact rewrites
//===----------------------------------------------------------------------===//

TEST_F(NormalizeTest, IsJBound) {
  EXPECT_TRUE(isJBound(B.ge(j, i)));
  EXPECT_TRUE(isJBound(B.lt(j, i + w)));
  EXPECT_FALSE(isJBound(B.le(j, i)));
  EXPECT_FALSE(isJBound(B.gt(j, i)));
  EXPECT_FALSE(isJBound(B.eq(j, i)));
  EXPECT_FALSE(isJBound(B.lt(i, j)));
  EXPECT_FALSE(isJBound(B.lt(j, B.min(j, i))));
  EXPECT_FALSE(isJBound(B.lt(i, w)));
  EXPECT_FALSE(isJBound(B.and_({B.ge(j, i), B.lt(j, w)})));
}

TEST_F(NormalizeTest, IsolateLeavesBoundsAndJFreeAtomsAlone) {
  EXPECT_EQ(*isolateJ(ctx, B.ge(j, i)), B.ge(j, i));
  EXPECT_EQ(*isolateJ(ctx, B.lt(j, i + w)), B.lt(j, i + w));
  EXPECT_EQ(*isolateJ(ctx, B.lt(i, w)), B.lt(i, w));
}

TEST_F(NormalizeTest, IsolateIsExactOnLinearAndFloorDivAtoms) {
  std::vector<std::pair<std::string, const Pred *>> atoms = {
      {"j <= i", B.le(j, i)},
      {"j < i", B.lt(j, i)},
      {"j > i", B.gt(j, i)},
      {"i - j >= w", B.ge(i - j, w)},
      {"2*j < i + 3", B.lt(2 * j, i + 3)},
      {"-3*j >= i - 7", B.ge(-3 * j, i - 7)},
      {"-2*j < -i", B.lt(-2 * j, -i)},
      {"3*j + 2*i == 7", B.eq(3 * j + 2 * i, 7)},
      {"5 - j > i", B.gt(5 - j, i)},
      {"j == i", B.eq(j, i)},
      {"j != i", B.ne(j, i)},
      {"4*j != i + w", B.ne(4 * j, i + w)},
      {"j - w == i floordiv 2", B.eq(j - w, B.floordiv(i, 2))},
      {"j floordiv 4 == i floordiv 4",
       B.eq(B.floordiv(j, 4), B.floordiv(i, 4))},
      {"j floordiv 4 != i floordiv 4",
       B.ne(B.floordiv(j, 4), B.floordiv(i, 4))},
      {"(j + 3) floordiv 5 <= i", B.le(B.floordiv(j + 3, 5), i)},
      {"(j - 2) floordiv 3 > i - w", B.gt(B.floordiv(j - 2, 3), i - w)},
      {"-(j floordiv 3) <= w", B.le(-B.floordiv(j, 3), w)},
      {"(2*j) floordiv 3 >= i", B.ge(B.floordiv(2 * j, 3), i)},
      {"(-j) floordiv 2 < i - 10", B.lt(B.floordiv(-j, 2), i - 10)},
      {"((j floordiv 2) floordiv 3) == i floordiv 6",
       B.eq(B.floordiv(B.floordiv(j, 2), 3), B.floordiv(i, 6))},
      {"3*(j floordiv 2) <= i + w", B.le(3 * B.floordiv(j, 2), i + w)},
      {"min(j, c) <= i", B.le(B.min(j, c), i)},
      {"min(j, c) > i", B.gt(B.min(j, c), i)},
      {"min(j, c) == i", B.eq(B.min(j, c), i)},
      {"max(j, 3) > i - 5", B.gt(B.max(j, 3), i - 5)},
      {"max(j, c) < i", B.lt(B.max(j, c), i)},
      {"max(j, c) != i", B.ne(B.max(j, c), i)},
      {"min(j + 2, 2*j) >= i", B.ge(B.min(j + 2, 2 * j), i)},
      {"max(min(j, c), 2) <= i", B.le(B.max(B.min(j, c), 2), i)},
      {"-max(j floordiv 2, w) >= -i", B.ge(-B.max(B.floordiv(j, 2), w), -i)},
      {"min(j floordiv 2, i) == c", B.eq(B.min(B.floordiv(j, 2), i), c)},
      {"j + i <= j + 3", B.le(j + i, j + 3)},
      {"2*j - w < 2*j + i", B.lt(2 * j - w, 2 * j + i)},
  };
  std::vector<TestEnv> envs = scalarEnvs();
  for (auto &[name, atom] : atoms) {
    SCOPED_TRACE(name);
    ASSERT_EQ(atom->getKind(), PredKind::Cmp);
    ASSERT_TRUE(atom->dependsOnJ());
    ASSERT_OK_AND_ASSIGN(const Pred *iso, isolateJ(ctx, atom));
    EXPECT_TRUE(isIsolatedForm(iso)) << iso->str();
    EXPECT_TRUE(agreeOn(atom, iso, envs, -3, 40, -3, 40));
  }
}

TEST_F(NormalizeTest, IsolateCancellationGivesAJFreeAtom) {
  const Pred *atom = B.le(j + i, j + 3);
  ASSERT_EQ(atom->getKind(), PredKind::Cmp);
  ASSERT_OK_AND_ASSIGN(const Pred *iso, isolateJ(ctx, atom));
  EXPECT_FALSE(iso->dependsOnJ()) << iso->str();
  EXPECT_TRUE(agreeOn(atom, iso, scalarEnvs(), -3, 10, -3, 3));
}

TEST_F(NormalizeTest, IsolateShapes) {
  // j <= i  ->  j < i + 1
  EXPECT_EQ(*isolateJ(ctx, B.le(j, i)), B.lt(j, i + 1));
  // j > i  ->  j >= i + 1
  EXPECT_EQ(*isolateJ(ctx, B.gt(j, i)), B.ge(j, i + 1));
  // j == i  ->  j >= i and j < i + 1
  EXPECT_EQ(*isolateJ(ctx, B.eq(j, i)), B.and_({B.ge(j, i), B.lt(j, i + 1)}));
  // j != i  ->  j < i or j >= i + 1
  EXPECT_EQ(*isolateJ(ctx, B.ne(j, i)), B.or_({B.lt(j, i), B.ge(j, i + 1)}));
  // seg(j) == seg(i): one interval of keys.
  ASSERT_OK_AND_ASSIGN(const Pred *seg,
                       isolateJ(ctx, B.eq(B.seg("doc", j), B.seg("doc", i))));
  ASSERT_EQ(seg->getKind(), PredKind::And);
  for (const Pred *atom : seg->getOperands())
    EXPECT_TRUE(isJBound(atom)) << atom->str();
}

TEST_F(NormalizeTest, IsolateIsExactOnSegmentAtoms) {
  E si = B.seg("doc", i), sj = B.seg("doc", j);
  std::vector<std::pair<std::string, const Pred *>> atoms = {
      {"seg(j) == seg(i)", B.eq(sj, si)},
      {"seg(j) != seg(i)", B.ne(sj, si)},
      {"seg(j) < seg(i) + 1", B.lt(sj, si + 1)},
      {"seg(j) <= seg(i) - 1", B.le(sj, si - 1)},
      {"seg(j) > seg(i)", B.gt(sj, si)},
      {"seg(j) >= 2", B.ge(sj, 2)},
      {"seg(j) < w", B.lt(sj, w)},
      {"2*seg(j) <= i", B.le(2 * sj, i)},
      {"seg(j) floordiv 2 == seg(i) floordiv 2",
       B.eq(B.floordiv(sj, 2), B.floordiv(si, 2))},
      {"min(seg(j), c) >= seg(i)", B.ge(B.min(sj, c), si)},
      {"seg(j) - seg(i) == c - 3", B.eq(sj - si, c - 3)},
  };
  std::vector<TestEnv> envs = segmentEnvs();
  for (auto &[name, atom] : atoms) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(const Pred *iso, isolateJ(ctx, atom));
    EXPECT_TRUE(isIsolatedForm(iso)) << iso->str();
    EXPECT_TRUE(agreeOnRows(atom, iso, envs));
  }
}

//===----------------------------------------------------------------------===//
// isolateJ: diagnostics
//===----------------------------------------------------------------------===//

TEST_F(NormalizeTest, IsolateRejectsWhatIsNotIntervalExpressible) {
  E p = B.scalar("p");
  struct Case {
    std::string name;
    const Pred *atom;
    std::vector<std::string> why;
  };
  std::vector<Case> cases = {
      {"j*j", B.le(j * j, i), {"multiplies j", "not a constant"}},
      {"j*w", B.lt(j * w, i), {"multiplies j", "not a constant"}},
      {"j*i", B.ge(j * i + 1, w), {"multiplies j"}},
      {"j mod 3", B.eq(B.mod(j, 3), 0), {"modulo"}},
      {"lookup(p, j)", B.le(B.lookup("p", j), i), {"indexes a metadata array"}},
      {"isqrt(j)", B.le(B.isqrt(j), i), {"square root"}},
      {"select(.., j, ..)",
       B.le(B.select(B.lt(i, w), j, w), i),
       {"selects on j"}},
      {"select on j", B.le(B.select(B.lt(j, w), i, w), 3), {"selects on j"}},
      {"j + (j floordiv 2)", B.le(j + B.floordiv(j, 2), i), {"two terms"}},
      {"seg(j+1)",
       B.eq(B.seg("doc", j + 1), B.seg("doc", i)),
       {"segment of a position other than j"}},
      {"j floordiv w", B.le(B.floordiv(j, w), i), {"positive constant"}},
      {"j floordiv -4", B.le(B.floordiv(j, -4), i), {"positive constant"}},
      {"seg_start(seg(j))",
       B.le(B.segStart("doc", B.seg("doc", j)), i),
       {"j-dependent segment"}},
      {"min(j*j, i)", B.le(B.min(j * j, p), i), {"multiplies j"}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case &cs = cases[k];
    SCOPED_TRACE(cs.name);
    ASSERT_EQ(cs.atom->getKind(), PredKind::Cmp);
    ctx.setOrigin(cs.atom, &cases[k]);
    CaughtError err = expectError(isolateJ(ctx, cs.atom));
    EXPECT_TRUE(err.isAnalysisError);
    EXPECT_EQ(err.origin, &cases[k]);
    EXPECT_NE(err.message.find("cannot isolate j"), std::string::npos)
        << err.message;
    EXPECT_NE(err.message.find(cs.atom->str()), std::string::npos)
        << err.message;
    for (const std::string &why : cs.why)
      EXPECT_NE(err.message.find(why), std::string::npos) << err.message;
  }
}

TEST_F(NormalizeTest, DiagnosticsPointAtTheUserAtomThroughNormalization) {
  int tag = 0;
  const Pred *bad = B.eq(B.mod(j, 3), 0);
  ctx.setOrigin(bad, &tag);
  // Behind a negation (the NNF rewrites the atom) and inside a union.
  const Pred *rule = B.or_({B.le(j, i), B.not_(B.and_({bad, B.lt(i, w)}))});
  CaughtError err = expectError(normalizeRule(ctx, rule));
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_EQ(err.origin, &tag);
  EXPECT_NE(err.message.find("modulo"), std::string::npos) << err.message;

  int tag2 = 0;
  const Pred *body = B.le(B.lookup("p", j + B.d(0)), i);
  ctx.setOrigin(body, &tag2);
  CaughtError err2 = expectError(normalizeRule(ctx, B.any(0, 0, 2, body)));
  EXPECT_TRUE(err2.isAnalysisError);
  EXPECT_EQ(err2.origin, &tag2);
  EXPECT_NE(err2.message.find("indexes a metadata array"), std::string::npos)
      << err2.message;
}

TEST_F(NormalizeTest, IsolateAllKeepsStructure) {
  const Pred *rule =
      B.or_({B.and_({B.le(j, i), B.ge(i - j, w)}),
             B.eq(B.floordiv(j, 4), B.floordiv(i, 4)), B.lt(i, c)});
  ASSERT_OK_AND_ASSIGN(const Pred *iso, isolateAll(ctx, rule));
  EXPECT_TRUE(isIsolatedForm(iso)) << iso->str();
  EXPECT_TRUE(agreeOn(rule, iso, scalarEnvs(), -3, 30, -3, 30));
}

//===----------------------------------------------------------------------===//
// DNF
//===----------------------------------------------------------------------===//

std::set<std::set<const Pred *>> asSets(const DNF &dnf) {
  std::set<std::set<const Pred *>> out;
  for (const Conjunct &c : dnf.conjuncts)
    out.insert(std::set<const Pred *>(c.begin(), c.end()));
  return out;
}

TEST_F(NormalizeTest, DNFDistributes) {
  const Pred *a = B.lt(i, w), *b = B.lt(i, c), *cc = B.ge(i, 2),
             *d = B.le(w, c);
  ASSERT_OK_AND_ASSIGN(DNF dnf,
                       toDNF(ctx, B.and_({B.or_({a, b}), B.or_({cc, d})})));
  EXPECT_EQ(dnf.conjuncts.size(), 4u);
  std::set<std::set<const Pred *>> expect = {{a, cc}, {a, d}, {b, cc}, {b, d}};
  EXPECT_EQ(asSets(dnf), expect);
  // Atoms inside a conjunct are unique.
  for (const Conjunct &conj : dnf.conjuncts)
    EXPECT_EQ(std::set<const Pred *>(conj.begin(), conj.end()).size(),
              conj.size());
}

TEST_F(NormalizeTest, DNFConstants) {
  ASSERT_OK_AND_ASSIGN(DNF t, toDNF(ctx, ctx.getTrue()));
  ASSERT_EQ(t.conjuncts.size(), 1u);
  EXPECT_TRUE(t.conjuncts[0].empty());
  ASSERT_OK_AND_ASSIGN(DNF f, toDNF(ctx, ctx.getFalse()));
  EXPECT_TRUE(f.conjuncts.empty());
  const Pred *a = B.lt(i, w);
  ASSERT_OK_AND_ASSIGN(DNF one, toDNF(ctx, a));
  ASSERT_EQ(one.conjuncts.size(), 1u);
  EXPECT_EQ(one.conjuncts[0], Conjunct{a});
}

TEST_F(NormalizeTest, DNFDedupesConjuncts) {
  const Pred *a = B.lt(i, w), *b = B.lt(i, c), *cc = B.ge(i, 2);
  // (a and b) or (a and (b or c))  ->  {a, b}, {a, c}
  const Pred *p = B.or_({B.and_({a, b}), B.and_({a, B.or_({b, cc})})});
  ASSERT_OK_AND_ASSIGN(DNF dnf, toDNF(ctx, p));
  std::set<std::set<const Pred *>> expect = {{a, b}, {a, cc}};
  EXPECT_EQ(asSets(dnf), expect);
  EXPECT_EQ(dnf.conjuncts.size(), 2u);
  // (a or b) and (a or c) -> {a} (from a and a), {a, c}, {a, b}, {b, c}.
  const Pred *q = B.and_({B.or_({a, b}), B.or_({a, cc})});
  ASSERT_OK_AND_ASSIGN(DNF dq, toDNF(ctx, q));
  std::set<std::set<const Pred *>> expectQ = {{a}, {a, cc}, {a, b}, {b, cc}};
  EXPECT_EQ(asSets(dq), expectQ);
  EXPECT_EQ(dq.conjuncts.size(), 4u);
}

TEST_F(NormalizeTest, DNFDropsContradictions) {
  const Pred *a = B.lt(i, w), *b = B.lt(i, c);
  const Pred *notA = B.not_(a); // i >= w
  // (a or b) and not a  ->  {b, not a}
  ASSERT_OK_AND_ASSIGN(DNF dnf, toDNF(ctx, B.and_({B.or_({a, b}), notA})));
  std::set<std::set<const Pred *>> expect = {{b, notA}};
  EXPECT_EQ(asSets(dnf), expect);
  // (a or not a) and (a) -> {a}
  ASSERT_OK_AND_ASSIGN(DNF d2,
                       toDNF(ctx, B.and_({B.or_({a, notA}), B.or_({a, b})})));
  for (const Conjunct &conj : d2.conjuncts)
    EXPECT_FALSE(llvm::is_contained(conj, a) && llvm::is_contained(conj, notA));
  // j bounds contradict too: j >= i and j < i.
  ASSERT_OK_AND_ASSIGN(
      DNF d3,
      toDNF(ctx, B.and_({B.ge(j, i), B.or_({B.lt(j, i), B.lt(j, w)})})));
  std::set<std::set<const Pred *>> expect3 = {{B.ge(j, i), B.lt(j, w)}};
  EXPECT_EQ(asSets(d3), expect3);
}

TEST_F(NormalizeTest, DNFSizeGuard) {
  // and of 20 binary ors over distinct atoms: 2^20 conjuncts.
  llvm::SmallVector<const Pred *, 20> ors;
  for (int k = 0; k < 20; ++k)
    ors.push_back(B.or_({B.lt(j, i + k), B.ge(i, w + k)}));
  const Pred *rule = B.and_(ors);
  auto start = std::chrono::steady_clock::now();
  CaughtError err = expectError(toDNF(ctx, rule));
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(secs, 2.0);
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_NE(err.message.find("4096"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("conjuncts"), std::string::npos) << err.message;
  // Through the whole normalization as well.
  start = std::chrono::steady_clock::now();
  CaughtError err2 = expectError(normalizeRule(ctx, rule));
  EXPECT_TRUE(err2.isAnalysisError);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      2.0);
}

TEST_F(NormalizeTest, DNFSizeGuardHonoursTheOption) {
  NormalizeOptions opts;
  opts.maxConjuncts = 8;
  llvm::SmallVector<const Pred *, 4> ors;
  for (int k = 0; k < 4; ++k)
    ors.push_back(B.or_({B.lt(i, w + k), B.ge(i, c + k)}));
  ASSERT_OK_AND_ASSIGN(DNF three,
                       toDNF(ctx, B.and_({ors[0], ors[1], ors[2]}), opts));
  EXPECT_EQ(three.conjuncts.size(), 8u);
  CaughtError err = expectError(toDNF(ctx, B.and_(ors), opts));
  EXPECT_NE(err.message.find("8"), std::string::npos) << err.message;
  // A wide disjunction counts as well.
  llvm::SmallVector<const Pred *, 9> wide;
  for (int k = 0; k < 9; ++k)
    wide.push_back(B.lt(i, w + k));
  EXPECT_TRUE(expectError(toDNF(ctx, B.or_(wide), opts)).isAnalysisError);
}

TEST_F(NormalizeTest, NormalizeRuleIsExact) {
  E si = B.seg("doc", i), sj = B.seg("doc", j);
  std::vector<std::pair<std::string, const Pred *>> rules = {
      {"causal", B.le(j, i)},
      {"sliding window", B.and_({B.le(0, i - j), B.le(i - j, w)})},
      {"prefix-LM", B.or_({B.lt(j, c), B.le(j, i)})},
      {"document causal", B.and_({B.eq(sj, si), B.le(j, i)})},
      {"not causal", B.not_(B.le(j, i))},
      {"blocks", B.not_(B.ne(B.floordiv(j, 4), B.floordiv(i, 4)))},
      {"union", B.any(0, -1, 1, B.eq(j, 2 * i + B.d(0)))},
      {"mixed", B.or_({B.and_({B.ge(i, c), B.eq(B.max(j, 2), si)}),
                       B.not_(B.or_({B.gt(j, w), B.ne(sj, si)}))})},
  };
  std::vector<TestEnv> envs = segmentEnvs();
  for (auto &[name, rule] : rules) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, rule));
    for (const Conjunct &conj : dnf.conjuncts)
      for (const Pred *atom : conj) {
        EXPECT_EQ(atom->getKind(), PredKind::Cmp) << atom->str();
        EXPECT_TRUE(isJBound(atom) || !atom->dependsOnJ()) << atom->str();
      }
    EXPECT_TRUE(agreeOnRows(rule, toPred(ctx, dnf), envs));
  }
}

TEST_F(NormalizeTest, ToPredAndFromPredRoundTrip) {
  const Pred *a = B.lt(i, w), *b = B.lt(i, c), *cc = B.ge(j, i);
  ASSERT_OK_AND_ASSIGN(DNF dnf, toDNF(ctx, B.and_({B.or_({a, b}), cc})));
  const Pred *p = toPred(ctx, dnf);
  ASSERT_OK_AND_ASSIGN(DNF back, fromPred(ctx, p));
  EXPECT_EQ(asSets(back), asSets(dnf));
  // Constants and single atoms.
  ASSERT_OK_AND_ASSIGN(DNF f, fromPred(ctx, ctx.getFalse()));
  EXPECT_TRUE(f.conjuncts.empty());
  ASSERT_OK_AND_ASSIGN(DNF t, fromPred(ctx, ctx.getTrue()));
  ASSERT_EQ(t.conjuncts.size(), 1u);
  EXPECT_TRUE(t.conjuncts[0].empty());
  ASSERT_OK_AND_ASSIGN(DNF single, fromPred(ctx, a));
  EXPECT_EQ(asSets(single), (std::set<std::set<const Pred *>>{{a}}));
  ASSERT_OK_AND_ASSIGN(DNF conj, fromPred(ctx, B.and_({a, cc})));
  EXPECT_EQ(asSets(conj), (std::set<std::set<const Pred *>>{{a, cc}}));
  EXPECT_EQ(toPred(ctx, DNF()), ctx.getFalse());
  // Not in DNF: an and over an or, a negation, a union.
  int tag = 0;
  const Pred *notDNF = B.and_({a, B.or_({b, cc})});
  ctx.setOrigin(notDNF, &tag);
  CaughtError err = expectError(fromPred(ctx, notDNF));
  EXPECT_NE(err.message.find("disjunctive normal form"), std::string::npos);
  EXPECT_EQ(err.origin, &tag);
  EXPECT_TRUE(
      expectError(fromPred(ctx, B.not_(B.and_({a, b})))).isAnalysisError);
  EXPECT_TRUE(expectError(fromPred(ctx, B.any(0, 0, 1, B.eq(j, B.d(0)))))
                  .isAnalysisError);
}

//===----------------------------------------------------------------------===//
// Randomized: normalization is exact
//===----------------------------------------------------------------------===//

TEST_F(NormalizeTest, RandomRulesNormalizeExactly) {
  E si = B.seg("doc", i), sj = B.seg("doc", j);
  std::vector<const Pred *> pool = {
      B.le(j, i),
      B.ge(i - j, w),
      B.lt(2 * j, i + 3),
      B.ge(-3 * j, i - 7),
      B.eq(B.floordiv(j, 4), B.floordiv(i, 4)),
      B.le(B.floordiv(j + 3, 5), i),
      B.le(B.min(j, c), i),
      B.gt(B.max(j, 3), i - 5),
      B.eq(sj, si),
      B.lt(sj, si + 1),
      B.ne(j, i),
      B.lt(i, c),
      B.ge(i, w),
      B.gt(j, c),
  };
  std::mt19937 rng(77);
  std::function<const Pred *(int)> gen = [&](int depth) -> const Pred * {
    if (depth == 0 || rng() % 3 == 0)
      return pool[rng() % pool.size()];
    switch (rng() % 3) {
    case 0:
      return B.and_({gen(depth - 1), gen(depth - 1)});
    case 1:
      return B.or_({gen(depth - 1), gen(depth - 1)});
    default:
      return B.not_(gen(depth - 1));
    }
  };
  std::vector<TestEnv> envs = segmentEnvs();
  for (int trial = 0; trial < 150; ++trial) {
    const Pred *rule = gen(4);
    SCOPED_TRACE(rule->str());
    ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, rule));
    ASSERT_TRUE(agreeOnRows(rule, toPred(ctx, dnf), envs));
  }
}

} // namespace
