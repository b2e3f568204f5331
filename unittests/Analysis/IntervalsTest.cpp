//===- IntervalsTest.cpp - Slots of DNF conjuncts -------------------------===//

#include "TestUtil.h"

using namespace cmask;
using namespace cmask::test;

namespace {

class IntervalsTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
  E i = B.i(), j = B.j(), w = B.scalar("w"), c = B.scalar("c");

  DNF dnfOf(std::initializer_list<Conjunct> conjuncts) {
    DNF dnf;
    for (const Conjunct &conj : conjuncts)
      dnf.conjuncts.push_back(conj);
    return dnf;
  }
};

TEST_F(IntervalsTest, OneSlotPerConjunct) {
  const Pred *lo = B.ge(j, i - w), *hi = B.lt(j, i + 1), *cond = B.ge(i, c);
  ASSERT_OK_AND_ASSIGN(auto slots,
                       extractIntervals(ctx, dnfOf({{lo, hi, cond}})));
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].cond, cond);
  EXPECT_EQ(slots[0].lo, (i - w).e);
  EXPECT_EQ(slots[0].hi, (i + 1).e);
  EXPECT_EQ(slots[0], (Slot{cond, i - w, i + 1}));
}

TEST_F(IntervalsTest, BoundsCombineWithMaxAndMin) {
  Conjunct conj = {B.ge(j, i - w), B.ge(j, c),     B.lt(j, i + 1),
                   B.lt(j, w + 7), B.lt(i, c + 9), B.ge(w, 0)};
  ASSERT_OK_AND_ASSIGN(auto slots, extractIntervals(ctx, dnfOf({conj})));
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].lo, B.max(i - w, c).e);
  EXPECT_EQ(slots[0].hi, B.min(i + 1, w + 7).e);
  EXPECT_EQ(slots[0].cond, B.and_({B.lt(i, c + 9), B.ge(w, 0)}));
}

TEST_F(IntervalsTest, MissingBoundsDefaultToTheKeyRange) {
  ASSERT_OK_AND_ASSIGN(
      auto slots,
      extractIntervals(ctx,
                       dnfOf({{B.lt(j, i)}, {B.ge(j, w)}, {B.lt(i, c)}, {}})));
  ASSERT_EQ(slots.size(), 4u);
  EXPECT_EQ(slots[0], (Slot{ctx.getTrue(), B.c(0), i}));
  EXPECT_EQ(slots[1], (Slot{ctx.getTrue(), w, B.kLen()}));
  EXPECT_EQ(slots[2], (Slot{B.lt(i, c), B.c(0), B.kLen()}));
  EXPECT_EQ(slots[3], (Slot{ctx.getTrue(), B.c(0), B.kLen()}));
  ASSERT_OK_AND_ASSIGN(auto none, extractIntervals(ctx, DNF()));
  EXPECT_TRUE(none.empty());
}

TEST_F(IntervalsTest, SlotsKeepConjunctOrder) {
  ASSERT_OK_AND_ASSIGN(
      auto slots,
      extractIntervals(ctx,
                       dnfOf({{B.lt(j, c)}, {B.lt(j, i + 1)}, {B.ge(j, w)}})));
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_EQ(slots[0].hi, c.e);
  EXPECT_EQ(slots[1].hi, (i + 1).e);
  EXPECT_EQ(slots[2].lo, w.e);
}

TEST_F(IntervalsTest, RejectsAtomsThatAreNotBounds) {
  int tag = 0;
  const Pred *raw = B.le(j, i); // not isolated
  ctx.setOrigin(raw, &tag);
  CaughtError err = expectError(
      extractIntervals(ctx, dnfOf({{B.ge(j, w)}, {raw, B.lt(i, c)}})));
  EXPECT_TRUE(err.isAnalysisError);
  EXPECT_EQ(err.origin, &tag);
  EXPECT_NE(err.message.find("mentions j"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find(raw->str()), std::string::npos) << err.message;
}

TEST_F(IntervalsTest, SlotPrinting) {
  Slot s{B.lt(i, c), B.c(0), i + 1};
  EXPECT_EQ(s.str(), "[0, i + 1) if i < c");
}

//===----------------------------------------------------------------------===//
// End to end: rule -> DNF -> slots shows exactly the rule's keys
//===----------------------------------------------------------------------===//

/// Checks every row of every env: the slots show exactly the rule's keys.
::testing::AssertionResult slotsMatchRule(const Pred *rule,
                                          llvm::ArrayRef<Slot> slots,
                                          std::vector<TestEnv> envs) {
  for (TestEnv &env : envs)
    for (env.i = 0; env.i < env.qLen; ++env.i) {
      std::vector<bool> want = visibleKeys(rule, env);
      std::vector<bool> got = visibleKeys(slots, env);
      if (want != got)
        return ::testing::AssertionFailure()
               << "row " << env.i << " (q_len=" << env.qLen
               << ", k_len=" << env.kLen << ")\n  rule:  " << showKeys(want)
               << "\n  slots: " << showKeys(got) << "\n"
               << showSlots(slots);
    }
  return ::testing::AssertionSuccess();
}

TEST_F(IntervalsTest, CatalogRulesGiveExactSlots) {
  E P = B.lookup("prompt_len", B.b());
  E si = B.seg("doc", i), sj = B.seg("doc", j);
  std::vector<std::pair<std::string, const Pred *>> rules = {
      {"causal", B.le(j, i)},
      {"bottom-right causal", B.le(j, i + B.kLen() - B.qLen())},
      {"sliding window", B.and_({B.le(0, i - j), B.le(i - j, w)})},
      {"document", B.eq(si, sj)},
      {"causal document", B.and_({B.eq(si, sj), B.le(j, i)})},
      {"prefix-LM", B.or_({B.lt(j, c), B.le(j, i)})},
      {"reward model", B.or_({B.and_({B.lt(i, P), B.le(j, i)}),
                              B.and_({B.ge(i, P), B.lt(j, P)}),
                              B.and_({B.ge(i, P), B.eq(sj, si), B.le(j, i)})})},
      {"blocks", B.eq(B.floordiv(j, 3), B.floordiv(i, 3))},
      {"strided union",
       B.any(0, -2, 2,
             B.and_({B.ge(j, i + 3 * B.d(0)), B.le(j, i + 3 * B.d(0) + 1)}))},
  };
  std::vector<TestEnv> envs;
  for (auto doc :
       std::vector<std::vector<int64_t>>{{}, {0, 4, 4, 9}, {3, 6, 13}})
    for (auto [q, k] :
         std::vector<std::pair<int64_t, int64_t>>{{13, 13}, {9, 13}, {13, 6}})
      for (int64_t wv : {0, 2}) {
        TestEnv env;
        env.qLen = q;
        env.kLen = k;
        env.b = 1;
        env.offs["doc"] = doc;
        env.arrays["prompt_len"] = {2, 3};
        env.scalars["w"] = wv;
        env.scalars["c"] = 4 - wv * 3;
        envs.push_back(env);
      }
  for (auto &[name, rule] : rules) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, rule));
    ASSERT_OK_AND_ASSIGN(auto slots, extractIntervals(ctx, dnf));
    EXPECT_EQ(slots.size(), dnf.conjuncts.size());
    for (const Slot &s : slots)
      EXPECT_FALSE(s.cond->dependsOnJ() || s.lo->dependsOnJ() ||
                   s.hi->dependsOnJ())
          << s.str();
    EXPECT_TRUE(slotsMatchRule(rule, slots, envs));
  }
}

/// CLEAR: T text tokens then an H x W image; image rows see the text and
/// the image keys within radius r (r <= R), one union copy per row offset d.
struct Clear {
  ExprContext &ctx;
  Builder &B;
  int64_t R;

  const Pred *imageRule() {
    E i = B.i(), j = B.j();
    E T = B.scalar("T"), W = B.scalar("W"), H = B.scalar("H"),
      r = B.scalar("r");
    E d = B.d(0);
    E q = i - T, y = B.floordiv(q, W), x = B.mod(q, W);
    E s = B.isqrt(r * r - d * d);
    E rowStart = T + (y + d) * W;
    const Pred *body =
        B.and_({B.le(d * d, r * r), B.ge(y + d, 0), B.lt(y + d, H),
                B.ge(j, rowStart + B.max(x - s, 0)),
                B.le(j, rowStart + B.min(x + s, W - 1))});
    return B.or_({B.lt(j, T), B.any(0, -R, R, body)});
  }
  const Pred *rule() {
    return B.or_({B.lt(B.i(), B.scalar("T")), imageRule()});
  }
  /// The reference, written without the compiler's rewrites.
  static bool visible(int64_t i, int64_t j, int64_t T, int64_t H, int64_t W,
                      int64_t r) {
    if (i < T || j < T)
      return true;
    if (j - T >= H * W)
      return false;
    int64_t dy = (j - T) / W - (i - T) / W;
    int64_t dx = (j - T) % W - (i - T) % W;
    return dy * dy + dx * dx <= r * r;
  }
};

std::vector<TestEnv> clearEnvs(int64_t R) {
  std::vector<TestEnv> envs;
  for (int64_t T : {0, 3})
    for (int64_t H : {3, 5})
      for (int64_t W : {4, 5})
        for (int64_t r = 0; r <= R; ++r) {
          TestEnv env;
          env.qLen = env.kLen = T + H * W;
          env.scalars["T"] = T;
          env.scalars["H"] = H;
          env.scalars["W"] = W;
          env.scalars["r"] = r;
          envs.push_back(env);
        }
  return envs;
}

TEST_F(IntervalsTest, ClearMatchesAnIndependentReference) {
  const int64_t R = 2;
  Clear clear{ctx, B, R};
  const Pred *rule = clear.rule();
  ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, rule));
  ASSERT_OK_AND_ASSIGN(auto slots, extractIntervals(ctx, dnf));
  // Text rows, text keys, and one slot per d.
  EXPECT_EQ(slots.size(), static_cast<size_t>(2 * R + 3));
  for (TestEnv env : clearEnvs(R)) {
    int64_t T = env.scalars["T"], H = env.scalars["H"], W = env.scalars["W"],
            r = env.scalars["r"];
    for (env.i = 0; env.i < env.qLen; ++env.i) {
      std::vector<bool> ref(env.kLen);
      for (int64_t k = 0; k < env.kLen; ++k)
        ref[k] = Clear::visible(env.i, k, T, H, W, r);
      ASSERT_EQ(visibleKeys(rule, env), ref)
          << "the rule itself disagrees with the reference at i=" << env.i;
      ASSERT_EQ(showKeys(visibleKeys(slots, env)), showKeys(ref))
          << "row " << env.i << " T=" << T << " H=" << H << " W=" << W
          << " r=" << r << "\n"
          << showSlots(slots);
    }
  }
}

} // namespace
