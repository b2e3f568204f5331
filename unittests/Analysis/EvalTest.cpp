//===- EvalTest.cpp - Concrete evaluation ---------------------------------===//

#include "TestUtil.h"

#include <limits>

using namespace cmask;
using namespace cmask::test;

namespace {

class EvalTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
  E i = B.i(), j = B.j();
  TestEnv env;
};

TEST(SegmentHelpers, IndexCountsBoundariesAtOrBeforeThePosition) {
  std::vector<int64_t> bounds = {0, 3, 3, 7, 10};
  EXPECT_EQ(segmentIndex(bounds, -1), 0);
  EXPECT_EQ(segmentIndex(bounds, 0), 1); // a boundary at 0: segment 0 empty
  EXPECT_EQ(segmentIndex(bounds, 2), 1);
  EXPECT_EQ(segmentIndex(bounds, 3), 3); // repeated boundary: segment 2 empty
  EXPECT_EQ(segmentIndex(bounds, 6), 3);
  EXPECT_EQ(segmentIndex(bounds, 7), 4);
  EXPECT_EQ(segmentIndex(bounds, 9), 4);
  EXPECT_EQ(segmentIndex(bounds, 10), 5);
  EXPECT_EQ(segmentIndex(bounds, 1000), 5);
  EXPECT_EQ(segmentIndex({}, 5), 0);
}

TEST(SegmentHelpers, BoundaryIsZeroBeforeAndLengthAfter) {
  std::vector<int64_t> bounds = {0, 3, 3, 7, 10};
  EXPECT_EQ(segmentBoundary(bounds, -5, 12), 0);
  EXPECT_EQ(segmentBoundary(bounds, -1, 12), 0);
  EXPECT_EQ(segmentBoundary(bounds, 0, 12), 0);
  EXPECT_EQ(segmentBoundary(bounds, 1, 12), 3);
  EXPECT_EQ(segmentBoundary(bounds, 2, 12), 3);
  EXPECT_EQ(segmentBoundary(bounds, 3, 12), 7);
  EXPECT_EQ(segmentBoundary(bounds, 4, 12), 10);
  EXPECT_EQ(segmentBoundary(bounds, 5, 12), 12);
  EXPECT_EQ(segmentBoundary(bounds, 99, 12), 12);
  EXPECT_EQ(segmentBoundary({}, 0, 7), 7);
  EXPECT_EQ(segmentBoundary({}, -1, 7), 0);
}

TEST_F(EvalTest, SegmentsWithEmptySegmentsAndBoundariesAtTheEnds) {
  env.offs["doc"] = {0, 3, 3, 7, 10};
  env.qLen = 8;
  env.kLen = 10; // L = 10: the last boundary is at L
  auto seg = [&](int64_t p) { return evaluate(B.seg("doc", p), env); };
  auto start = [&](int64_t s) { return evaluate(B.segStart("doc", s), env); };
  auto end = [&](int64_t s) { return evaluate(B.segEnd("doc", s), env); };
  // Segment s is [boundary(s - 1), boundary(s)).
  EXPECT_EQ(start(0), 0);
  EXPECT_EQ(end(0), 0); // empty: the first boundary is 0
  EXPECT_EQ(start(1), 0);
  EXPECT_EQ(end(1), 3);
  EXPECT_EQ(start(2), 3);
  EXPECT_EQ(end(2), 3); // empty: repeated boundary
  EXPECT_EQ(start(3), 3);
  EXPECT_EQ(end(3), 7);
  EXPECT_EQ(start(4), 7);
  EXPECT_EQ(end(4), 10);
  EXPECT_EQ(start(5), 10);
  EXPECT_EQ(end(5), 10); // empty: boundary at L
  EXPECT_EQ(start(-3), 0);
  EXPECT_EQ(end(-3), 0);
  EXPECT_EQ(start(9), 10);
  EXPECT_EQ(end(9), 10);
  // Every position lies in its own segment, which is never empty.
  for (int64_t p = 0; p < 10; ++p) {
    int64_t s = seg(p);
    EXPECT_LE(start(s), p) << p;
    EXPECT_LT(p, end(s)) << p;
  }
  EXPECT_EQ(seg(0), 1);
  EXPECT_EQ(seg(3), 3);
  EXPECT_EQ(seg(9), 4);
}

TEST_F(EvalTest, SegmentLengthIsTheLongerOfQueryAndKey) {
  env.offs["doc"] = {4};
  env.qLen = 9;
  env.kLen = 6;
  EXPECT_EQ(evaluate(B.segEnd("doc", 1), env), 9);
  env.qLen = 3;
  EXPECT_EQ(evaluate(B.segEnd("doc", 1), env), 6);
  // No boundaries: one segment covering everything.
  env.offs["doc"] = {};
  EXPECT_EQ(evaluate(B.seg("doc", 5), env), 0);
  EXPECT_EQ(evaluate(B.segStart("doc", 0), env), 0);
  EXPECT_EQ(evaluate(B.segEnd("doc", 0), env), 6);
}

TEST_F(EvalTest, SegmentsOfRowExpressions) {
  env.offs["doc"] = {2, 5};
  env.qLen = env.kLen = 8;
  E s = B.seg("doc", i);
  E rule = B.segEnd("doc", s) - B.segStart("doc", s); // length of i's segment
  std::vector<int64_t> expect = {2, 2, 3, 3, 3, 3, 3, 3};
  for (env.i = 0; env.i < 8; ++env.i)
    EXPECT_EQ(evaluate(rule, env), expect[env.i]) << env.i;
}

TEST_F(EvalTest, VariablesMetadataAndArithmetic) {
  env.i = 5;
  env.j = -3;
  env.b = 1;
  env.qLen = 7;
  env.kLen = 9;
  env.scalars["w"] = 4;
  env.arrays["len"] = {10, 20};
  E w = B.scalar("w");
  EXPECT_EQ(evaluate(i, env), 5);
  EXPECT_EQ(evaluate(j, env), -3);
  EXPECT_EQ(evaluate(B.b(), env), 1);
  EXPECT_EQ(evaluate(B.qLen(), env), 7);
  EXPECT_EQ(evaluate(B.kLen(), env), 9);
  EXPECT_EQ(evaluate(w, env), 4);
  EXPECT_EQ(evaluate(B.lookup("len", B.b()), env), 20);
  EXPECT_EQ(evaluate(B.lookup("len", B.b() + 1), env), 0); // out of range
  EXPECT_EQ(evaluate(3 * i - 2 * w + 1, env), 8);
  EXPECT_EQ(evaluate(i * w, env), 20);
  EXPECT_EQ(evaluate(B.floordiv(j, 2), env), -2);
  EXPECT_EQ(evaluate(B.mod(j, 2), env), 1);
  EXPECT_EQ(evaluate(B.floordiv(i, j), env), -2);
  EXPECT_EQ(evaluate(B.mod(i, j), env), -1);
  EXPECT_EQ(evaluate(B.floordiv(i, w - 4), env), 0); // division by zero
  EXPECT_EQ(evaluate(B.mod(i, w - 4), env), 0);
  EXPECT_EQ(evaluate(B.isqrt(i * w), env), 4);
  EXPECT_EQ(evaluate(B.isqrt(j), env), 0);
  EXPECT_EQ(evaluate(ctx.getMin({i, w, j + 10}), env), 4);
  EXPECT_EQ(evaluate(ctx.getMax({i, w, j + 10}), env), 7);
  EXPECT_EQ(evaluate(B.select(B.lt(j, 0), i, w), env), 5);
  EXPECT_EQ(evaluate(B.select(B.gt(j, 0), i, w), env), 4);
  // 64-bit wrapping.
  env.scalars["w"] = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(evaluate(w + 1, env), std::numeric_limits<int64_t>::min());
}

TEST_F(EvalTest, UnionVariablesAndPredicates) {
  E d = B.d(3);
  llvm::DenseMap<int64_t, int64_t> unions;
  unions[3] = 7;
  env.i = 2;
  EXPECT_EQ(evaluate(i + d, env, unions), 9);
  EXPECT_EQ(evaluate(i + d, env), 2); // unbound union variables read 0
  const Pred *any = B.any(3, -1, 1, B.eq(j, i + d));
  for (env.j = -2; env.j < 8; ++env.j)
    EXPECT_EQ(evaluate(any, env), env.j >= 1 && env.j <= 3) << env.j;
  // The union's own binding shadows an outer value of the same variable.
  env.j = 9;
  EXPECT_FALSE(evaluate(any, env, unions));
  env.j = 2;
  EXPECT_TRUE(evaluate(
      B.and_({B.le(j, i), B.not_(B.and_({B.lt(j, i), B.ge(j, 0)}))}), env));
  EXPECT_FALSE(evaluate(B.or_({B.lt(j, i), B.gt(j, i)}), env));
  EXPECT_TRUE(evaluate(ctx.getTrue(), env));
  EXPECT_FALSE(evaluate(ctx.getFalse(), env));
  for (CmpKind k : {CmpKind::EQ, CmpKind::NE, CmpKind::LT, CmpKind::LE,
                    CmpKind::GT, CmpKind::GE})
    for (env.j = 0; env.j < 5; ++env.j) {
      bool expect;
      switch (k) {
      case CmpKind::EQ:
        expect = env.j == 2;
        break;
      case CmpKind::NE:
        expect = env.j != 2;
        break;
      case CmpKind::LT:
        expect = env.j < 2;
        break;
      case CmpKind::LE:
        expect = env.j <= 2;
        break;
      case CmpKind::GT:
        expect = env.j > 2;
        break;
      case CmpKind::GE:
        expect = env.j >= 2;
        break;
      }
      EXPECT_EQ(evaluate(B.cmp(k, j, i), env), expect);
    }
}

} // namespace
