//===- SlotsTest.cpp - Canonicalization of a region's slots ---------------===//

#include "cmask/Analysis/Slots.h"

#include "cmask/Analysis/Prover.h"

#include "TestUtil.h"

#include <functional>
#include <random>

using namespace cmask;
using namespace cmask::test;

namespace {

class SlotsTest : public ::testing::Test {
protected:
  ExprContext ctx;
  Builder B{ctx};
  E i = B.i(), j = B.j(), c = B.scalar("c"), p = B.scalar("p"), kLen = B.kLen(),
    zero = B.c(0);
  const Pred *T = ctx.getTrue();

  llvm::SmallVector<const Pred *, 8> domain() {
    auto facts = Prover::domainFacts(ctx);
    return llvm::SmallVector<const Pred *, 8>(facts.begin(), facts.end());
  }
  llvm::SmallVector<Slot, 4>
  canon(llvm::ArrayRef<Slot> slots,
        llvm::ArrayRef<const Pred *> extraFacts = {}) {
    auto facts = domain();
    facts.append(extraFacts.begin(), extraFacts.end());
    return canonicalizeSlots(ctx, slots, facts);
  }
};

/// The slots of two sets show the same keys on every row of every env
/// where all `facts` hold.
::testing::AssertionResult sameVisibleSets(llvm::ArrayRef<Slot> before,
                                           llvm::ArrayRef<Slot> after,
                                           std::vector<TestEnv> envs,
                                           llvm::ArrayRef<const Pred *> facts) {
  for (TestEnv &env : envs)
    for (env.i = 0; env.i < env.qLen; ++env.i) {
      if (!llvm::all_of(facts, [&](const Pred *f) { return evaluate(f, env); }))
        continue;
      std::vector<bool> want = visibleKeys(before, env);
      std::vector<bool> got = visibleKeys(after, env);
      if (want != got)
        return ::testing::AssertionFailure()
               << "row " << env.i << " q_len=" << env.qLen
               << " k_len=" << env.kLen << " c=" << env.scalars.lookup("c")
               << " p=" << env.scalars.lookup("p")
               << "\n  before: " << showKeys(want)
               << "\n  after:  " << showKeys(got) << "\nbefore:\n"
               << showSlots(before) << "after:\n"
               << showSlots(after);
    }
  return ::testing::AssertionSuccess();
}

std::vector<TestEnv> smallEnvs() {
  std::vector<TestEnv> envs;
  for (int64_t q : {1, 6, 11})
    for (int64_t k = 0; k <= 12; k += 3)
      for (int64_t c : {-2, 0, 3, 8})
        for (int64_t p : {-1, 2, 5, 14}) {
          TestEnv env;
          env.qLen = q;
          env.kLen = k;
          env.b = 0;
          env.scalars["c"] = c;
          env.scalars["p"] = p;
          envs.push_back(env);
        }
  return envs;
}

//===----------------------------------------------------------------------===//
// Reference masks
//===----------------------------------------------------------------------===//

TEST_F(SlotsTest, PrefixLMMergesToOneSlot) {
  // j < p or j <= i: [0, p) and [0, i + 1) -> [0, max(p, i + 1)).
  llvm::SmallVector<Slot, 4> in = {{T, zero, p}, {T, zero, i + 1}};
  auto out = canon(in);
  ASSERT_EQ(out.size(), 1u) << showSlots(out);
  EXPECT_EQ(out[0], (Slot{T, zero, B.max(p, i + 1)}));
  EXPECT_TRUE(sameVisibleSets(in, out, smallEnvs(), domain()));
}

TEST_F(SlotsTest, HstuHistoryMergesToOneSlot) {
  // History rows (i >= c): [0, c) and [c, i + 1) -> [0, i + 1).
  llvm::SmallVector<Slot, 4> in = {{T, zero, c}, {T, c, i + 1}};
  const Pred *fact = B.ge(i, c);
  auto out = canon(in, {fact});
  ASSERT_EQ(out.size(), 1u) << showSlots(out);
  EXPECT_EQ(out[0].cond, T);
  EXPECT_EQ(out[0].lo, zero.e);
  EXPECT_EQ(out[0].hi, (i + 1).e) << out[0].str();
  auto facts = domain();
  facts.push_back(fact);
  EXPECT_TRUE(sameVisibleSets(in, out, smallEnvs(), facts));
  // Without the fact that the row is past the context, c may exceed i + 1:
  // the result must still be exact (one slot [0, max(c, i + 1)) is).
  auto loose = canon(in);
  EXPECT_TRUE(sameVisibleSets(in, loose, smallEnvs(), domain()));
}

TEST_F(SlotsTest, RewardModelResponseKeepsTwoSlots) {
  E P = B.lookup("prompt_len", B.b());
  E s = B.seg("resp", i);
  llvm::SmallVector<Slot, 4> in = {
      {T, zero, P},
      {T, B.segStart("resp", s), B.min(B.segEnd("resp", s), i + 1)}};
  const Pred *fact = B.ge(i, P);
  auto out = canon(in, {fact});
  ASSERT_EQ(out.size(), 2u) << showSlots(out);
  // The response slot's end is decided by the facts: seg_end(seg(i)) > i.
  for (const Slot &slot : out) {
    if (slot.lo != zero.e) {
      EXPECT_EQ(slot.hi, (i + 1).e) << slot.str();
    }
  }
  // Exact on concrete data.
  std::vector<TestEnv> envs;
  for (auto offs : std::vector<std::vector<int64_t>>{
           {3, 5, 5, 8}, {0, 4}, {}, {2, 2, 2}, {6, 9, 12}})
    for (int64_t prompt : {0, 2, 3, 7}) {
      TestEnv env;
      env.qLen = env.kLen = 12;
      env.b = 0;
      env.arrays["prompt_len"] = {prompt};
      env.offs["resp"] = offs;
      envs.push_back(env);
    }
  auto facts = domain();
  facts.push_back(fact);
  EXPECT_TRUE(sameVisibleSets(in, out, envs, facts));
}

//===----------------------------------------------------------------------===//
// The individual rewrites
//===----------------------------------------------------------------------===//

TEST_F(SlotsTest, DuplicatesAreRemoved) {
  Slot s{B.lt(i, c), i - 2, i + 1};
  auto out = canon({s, s, s});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], s);
}

TEST_F(SlotsTest, SubsumedSlotIsRemoved) {
  // [i - 1, i + 1) under `i >= c` is inside [i - 3, i + 1) (always).
  Slot outer{T, i - 3, i + 1};
  Slot inner{B.ge(i, c), i - 1, i + 1};
  auto out = canon({inner, outer});
  ASSERT_EQ(out.size(), 1u) << showSlots(out);
  EXPECT_EQ(out[0], outer);
  // Not subsumed when the outer slot needs a condition the inner lacks.
  Slot guardedOuter{B.ge(i, c), i - 3, i + 1};
  Slot plainInner{T, i - 1, i + 1};
  auto kept = canon({plainInner, guardedOuter});
  EXPECT_EQ(kept.size(), 2u) << showSlots(kept);
  EXPECT_TRUE(
      sameVisibleSets({plainInner, guardedOuter}, kept, smallEnvs(), domain()));
  // Containment after clamping: [0, k_len) contains [-5, k_len + 3).
  auto clamped = canon({{T, i - 100, kLen + 3}, {T, zero, kLen}});
  EXPECT_EQ(clamped.size(), 1u) << showSlots(clamped);
}

TEST_F(SlotsTest, ProvablyEmptySlotsAreRemoved) {
  Slot keep{T, zero, i + 1};
  auto out = canon({{T, i + 1, i},            // hi < lo
                    {T, i, i},                // lo == hi
                    {T, kLen, kLen + 3},      // starts at the end of the keys
                    {T, c - 5, zero},         // ends at or before 0
                    {B.lt(i, 0), zero, kLen}, // the row condition is impossible
                    {ctx.getFalse(), zero, kLen},
                    {B.and_({B.lt(i, c), B.gt(i, c + 2)}), zero, kLen},
                    keep});
  ASSERT_EQ(out.size(), 1u) << showSlots(out);
  EXPECT_EQ(out[0], keep);
  EXPECT_TRUE(canon({{T, i + 1, i}}).empty());
}

TEST_F(SlotsTest, AdjacentAndOverlappingSlotsMerge) {
  // [0, i) and [i, k_len) -> [0, k_len).
  auto out = canon({{T, zero, i}, {T, i, kLen}});
  ASSERT_EQ(out.size(), 1u) << showSlots(out);
  EXPECT_EQ(out[0], (Slot{T, zero, kLen}));
  // Overlapping: [i - 4, i + 1) and [i - 2, i + 3) -> [i - 4, i + 3).
  auto ov = canon({{T, i - 2, i + 3}, {T, i - 4, i + 1}});
  ASSERT_EQ(ov.size(), 1u) << showSlots(ov);
  EXPECT_EQ(ov[0].lo, (i - 4).e);
  EXPECT_EQ(ov[0].hi, (i + 3).e);
  // A gap is not merged: [0, i) and [i + 1, k_len).
  llvm::SmallVector<Slot, 4> gap = {{T, zero, i}, {T, i + 1, kLen}};
  auto g = canon(gap);
  EXPECT_EQ(g.size(), 2u) << showSlots(g);
  // Different conditions are not merged.
  llvm::SmallVector<Slot, 4> conds = {{B.lt(i, c), zero, i}, {T, i, kLen}};
  auto d = canon(conds);
  EXPECT_EQ(d.size(), 2u) << showSlots(d);
  EXPECT_TRUE(sameVisibleSets(conds, d, smallEnvs(), domain()));
  // Equal upper bounds merge with a min of the lower bounds.
  auto up = canon({{T, c, i + 1}, {T, p, i + 1}});
  ASSERT_EQ(up.size(), 1u) << showSlots(up);
  EXPECT_EQ(up[0].lo, B.min(c, p).e);
  EXPECT_EQ(up[0].hi, (i + 1).e);
}

TEST_F(SlotsTest, EndpointsSimplifyUnderFacts) {
  // max(0, i - 3) as a lower bound is just i - 3 after clamping; min(k_len,
  // i + 1) as an upper bound is i + 1 for the same reason.
  auto out = canon({{T, B.max(zero, i - 3), B.min(kLen, i + 1)}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].lo, (i - 3).e) << out[0].str();
  EXPECT_EQ(out[0].hi, (i + 1).e) << out[0].str();
  // A lower bound <= 0 is 0; an upper bound >= k_len is k_len.
  auto ends = canon({{T, B.min(zero, c), B.max(kLen, i)}});
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].lo, zero.e);
  EXPECT_EQ(ends[0].hi, kLen.e);
  // Dominated operands: max(c, c - 2) == c, min(i + 1, i + 5) == i + 1.
  auto dom = canon({{T, B.max(c, c - 2), B.min(i + 1, i + 5)}});
  ASSERT_EQ(dom.size(), 1u);
  EXPECT_EQ(dom[0].lo, c.e) << dom[0].str();
  EXPECT_EQ(dom[0].hi, (i + 1).e) << dom[0].str();
  // Undecided operands stay.
  auto undecided = canon({{T, B.max(c, p), B.min(i + 1, p + 5)}});
  ASSERT_EQ(undecided.size(), 1u);
  EXPECT_EQ(undecided[0].lo, B.max(c, p).e);
  EXPECT_EQ(undecided[0].hi, B.min(i + 1, p + 5).e);
}

TEST_F(SlotsTest, EmptyInputGivesNoSlots) { EXPECT_TRUE(canon({}).empty()); }

TEST_F(SlotsTest, RegionFacts) {
  E P = B.lookup("prompt_len", B.b());
  // Region 0: i < P. Region 1: i >= P and i < 2*P. Region 2: everything
  // else (true).
  llvm::SmallVector<const Pred *, 3> guards = {
      B.lt(i, P), B.and_({B.ge(i, P), B.lt(i, 2 * P)}), T};
  auto f0 = regionFacts(ctx, guards, 0);
  Prover p0(ctx, f0);
  EXPECT_TRUE(p0.proveLT(i, P));
  EXPECT_TRUE(p0.proveLE(B.c(0), i));
  auto f1 = regionFacts(ctx, guards, 1);
  Prover p1(ctx, f1);
  EXPECT_TRUE(p1.proveLE(P, i));
  EXPECT_TRUE(p1.proveLT(i, 2 * P));
  EXPECT_TRUE(p1.proveLT(i, B.qLen()));
  auto f2 = regionFacts(ctx, guards, 2);
  Prover p2(ctx, f2);
  // Not region 0: i >= P.
  EXPECT_TRUE(p2.proveLE(P, i));
  // Every fact holds on every row its region applies to.
  TestEnv env;
  env.qLen = env.kLen = 10;
  for (int64_t prompt : {0, 2, 4, 7}) {
    env.arrays["prompt_len"] = {prompt};
    for (env.i = 0; env.i < env.qLen; ++env.i) {
      unsigned region = 0;
      while (!evaluate(guards[region], env))
        ++region;
      for (const Pred *f : regionFacts(ctx, guards, region))
        EXPECT_TRUE(evaluate(f, env)) << f->str() << " at i=" << env.i;
    }
  }
}

//===----------------------------------------------------------------------===//
// The catalog, region by region
//===----------------------------------------------------------------------===//

struct Region {
  const Pred *guard;
  const Pred *rule;
  size_t expectK;
};

/// Compiles every region (normalize, extract, canonicalize with the region's
/// facts), checks its K, and compares every row of every env against the
/// rule of the first region whose guard holds.
void checkMask(ExprContext &ctx, llvm::ArrayRef<Region> regions,
               std::vector<TestEnv> envs) {
  llvm::SmallVector<const Pred *, 4> guards;
  for (const Region &r : regions)
    guards.push_back(r.guard);
  std::vector<llvm::SmallVector<Slot, 4>> compiled;
  for (unsigned k = 0; k < regions.size(); ++k) {
    SCOPED_TRACE("region " + std::to_string(k));
    ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, regions[k].rule));
    ASSERT_OK_AND_ASSIGN(auto slots, extractIntervals(ctx, dnf));
    auto facts = regionFacts(ctx, guards, k);
    compiled.push_back(canonicalizeSlots(ctx, slots, facts));
    EXPECT_EQ(compiled.back().size(), regions[k].expectK)
        << showSlots(compiled.back());
  }
  for (TestEnv &env : envs)
    for (env.i = 0; env.i < env.qLen; ++env.i) {
      unsigned k = 0;
      while (k < regions.size() && !evaluate(regions[k].guard, env))
        ++k;
      if (k == regions.size())
        continue;
      ASSERT_EQ(showKeys(visibleKeys(compiled[k], env)),
                showKeys(visibleKeys(regions[k].rule, env)))
          << "region " << k << " row " << env.i << " q_len=" << env.qLen
          << " k_len=" << env.kLen << "\n"
          << showSlots(compiled[k]);
    }
}

TEST_F(SlotsTest, CatalogMasksHaveTheExpectedK) {
  E w = B.scalar("w"), P = B.lookup("prompt_len", B.b()),
    nt = B.lookup("num_targets", B.b());
  E di = B.seg("doc", i), dj = B.seg("doc", j);
  E ri = B.seg("resp", i), rj = B.seg("resp", j);
  std::vector<TestEnv> envs;
  for (auto offs :
       std::vector<std::vector<int64_t>>{{}, {0, 4, 4, 9}, {3, 6, 12}, {5}})
    for (auto [q, k] :
         std::vector<std::pair<int64_t, int64_t>>{{12, 12}, {9, 12}, {12, 7}})
      for (int64_t v : {0, 2, 5}) {
        TestEnv env;
        env.qLen = q;
        env.kLen = k;
        env.b = 0;
        env.offs["doc"] = offs;
        env.offs["resp"] = offs;
        env.arrays["prompt_len"] = {v};
        env.arrays["num_targets"] = {v};
        env.scalars["w"] = v;
        env.scalars["c"] = 4 - v;
        env.scalars["p"] = 2 * v;
        envs.push_back(env);
      }
  {
    SCOPED_TRACE("causal");
    checkMask(ctx, {{T, B.le(j, i), 1}}, envs);
  }
  {
    SCOPED_TRACE("sliding window");
    checkMask(ctx, {{T, B.and_({B.le(0, i - j), B.le(i - j, w)}), 1}}, envs);
  }
  {
    SCOPED_TRACE("document");
    checkMask(ctx, {{T, B.eq(di, dj), 1}}, envs);
  }
  {
    SCOPED_TRACE("causal document");
    checkMask(ctx, {{T, B.and_({B.eq(di, dj), B.le(j, i)}), 1}}, envs);
  }
  {
    SCOPED_TRACE("prefix-LM");
    checkMask(ctx, {{T, B.or_({B.lt(j, p), B.le(j, i)}), 1}}, envs);
  }
  {
    SCOPED_TRACE("reward model");
    checkMask(ctx,
              {{B.lt(i, P), B.le(j, i), 1},
               {T, B.or_({B.lt(j, P), B.and_({B.eq(rj, ri), B.le(j, i)})}), 2}},
              envs);
  }
  {
    SCOPED_TRACE("HSTU");
    E histEnd = B.kLen() - nt;
    checkMask(ctx,
              {{B.lt(i, c), B.lt(j, histEnd), 1},
               {B.lt(i, B.qLen() - nt),
                B.or_({B.lt(j, c), B.and_({B.le(c, j), B.le(j, i)})}), 1},
               {T, B.or_({B.lt(j, histEnd), B.eq(j, i)}), 2}},
              envs);
  }
}

TEST_F(SlotsTest, ClearHasTwoSlotsPerRowOffsetPlusText) {
  for (int64_t R : {1, 2, 16}) {
    SCOPED_TRACE("R = " + std::to_string(R));
    E Tx = B.scalar("T"), W = B.scalar("W"), H = B.scalar("H"),
      r = B.scalar("r");
    E d = B.d(0);
    E q = i - Tx, y = B.floordiv(q, W), x = B.mod(q, W);
    E s = B.isqrt(r * r - d * d);
    E rowStart = Tx + (y + d) * W;
    const Pred *body =
        B.and_({B.le(d * d, r * r), B.ge(y + d, 0), B.lt(y + d, H),
                B.ge(j, rowStart + B.max(x - s, 0)),
                B.le(j, rowStart + B.min(x + s, W - 1))});
    const Pred *image = B.or_({B.lt(j, Tx), B.any(0, -R, R, body)});
    std::vector<TestEnv> envs;
    if (R <= 2)
      for (int64_t Tv : {0, 3})
        for (int64_t Hv : {3, 5})
          for (int64_t Wv : {4, 5})
            for (int64_t rv = 0; rv <= R; ++rv) {
              TestEnv env;
              env.qLen = env.kLen = Tv + Hv * Wv;
              env.scalars["T"] = Tv;
              env.scalars["H"] = Hv;
              env.scalars["W"] = Wv;
              env.scalars["r"] = rv;
              envs.push_back(env);
            }
    checkMask(ctx,
              {{B.lt(i, Tx), ctx.getTrue(), 1},
               {T, image, static_cast<size_t>(2 * R + 2)}},
              envs);
  }
}

//===----------------------------------------------------------------------===//
// Randomized soundness
//===----------------------------------------------------------------------===//

class RandomSlots {
public:
  RandomSlots(Builder &B, uint32_t seed) : B(B), rng(seed) {}

  int64_t pick(int64_t n) { return static_cast<int64_t>(rng() % n); }

  E leaf() {
    switch (pick(6)) {
    case 0:
      return B.c(pick(9) - 2);
    case 1:
      return B.i();
    case 2:
      return B.scalar("c");
    case 3:
      return B.scalar("p");
    case 4:
      return B.qLen();
    default:
      return B.kLen();
    }
  }

  E expr(int depth) {
    if (depth == 0 || pick(3) == 0)
      return leaf();
    switch (pick(7)) {
    case 0:
      return expr(depth - 1) + expr(depth - 1);
    case 1:
      return expr(depth - 1) - expr(depth - 1);
    case 2:
      return expr(depth - 1) + (pick(7) - 3);
    case 3:
      return B.min(expr(depth - 1), expr(depth - 1));
    case 4:
      return B.max(expr(depth - 1), expr(depth - 1));
    case 5:
      return B.floordiv(expr(depth - 1), pick(2) + 2);
    default:
      return (pick(2) + 2) * expr(depth - 1);
    }
  }

  const Pred *cond() {
    llvm::SmallVector<const Pred *, 2> atoms;
    for (int64_t k = pick(3); k > 0; --k)
      atoms.push_back(B.cmp(static_cast<CmpKind>(pick(6)), expr(1), expr(1)));
    return B.and_(atoms);
  }

  /// A slot set with shared endpoints and conditions, so that merges and
  /// containments actually happen.
  llvm::SmallVector<Slot, 4> slots() {
    llvm::SmallVector<E, 4> ends = {expr(2),   expr(2), expr(1),
                                    B.i() + 1, B.c(0),  B.kLen()};
    llvm::SmallVector<const Pred *, 3> conds = {B.ctx.getTrue(), cond(),
                                                cond()};
    llvm::SmallVector<Slot, 4> out;
    for (int64_t n = pick(5) + 1; n > 0; --n) {
      E lo = pick(3) ? ends[pick(ends.size())] : expr(2);
      E hi = pick(3) ? ends[pick(ends.size())] : expr(2);
      out.push_back({conds[pick(conds.size())], lo, hi});
    }
    return out;
  }

private:
  Builder &B;
  std::mt19937 rng;
};

TEST_F(SlotsTest, RandomizedCanonicalizationIsSound) {
  RandomSlots gen(B, 2024);
  std::vector<TestEnv> envs;
  for (int64_t k = 0; k <= 12; ++k)
    for (int64_t cv : {-3, -1, 0, 2, 5, 9})
      for (int64_t pv : {-2, 1, 4, 13})
        for (int64_t qv : {1, 4, 9}) {
          TestEnv env;
          env.qLen = qv;
          env.kLen = k;
          env.scalars["c"] = cv;
          env.scalars["p"] = pv;
          envs.push_back(env);
        }
  auto facts = domain();
  size_t totalIn = 0, totalOut = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto in = gen.slots();
    auto out = canonicalizeSlots(ctx, in, facts);
    totalIn += in.size();
    totalOut += out.size();
    ASSERT_LE(out.size(), in.size());
    ASSERT_TRUE(sameVisibleSets(in, out, envs, facts)) << "trial " << trial;
  }
  // The generator produces sets that canonicalization actually shrinks.
  EXPECT_LT(totalOut, totalIn);
}

/// Same, over slots extracted from random rules with segments.
TEST_F(SlotsTest, RandomizedRulesCanonicalizeSoundly) {
  E si = B.seg("doc", i), sj = B.seg("doc", j);
  std::vector<const Pred *> pool = {
      B.le(j, i),
      B.ge(i - j, c),
      B.lt(j, p),
      B.eq(sj, si),
      B.lt(sj, si + 1),
      B.ge(j, B.segStart("doc", si)),
      B.lt(i, c),
      B.ge(i, p),
      B.eq(B.floordiv(j, 4), B.floordiv(i, 4)),
      B.le(B.min(j, c), i),
      B.gt(B.max(j, 3), i - 5),
      B.lt(j, B.segEnd("doc", si)),
  };
  std::mt19937 rng(99);
  std::function<const Pred *(int)> genRule = [&](int depth) -> const Pred * {
    if (depth == 0 || rng() % 3 == 0)
      return pool[rng() % pool.size()];
    switch (rng() % 3) {
    case 0:
      return B.and_({genRule(depth - 1), genRule(depth - 1)});
    case 1:
      return B.or_({genRule(depth - 1), genRule(depth - 1)});
    default:
      return B.not_(genRule(depth - 1));
    }
  };
  std::vector<TestEnv> envs;
  for (auto offs : std::vector<std::vector<int64_t>>{
           {}, {0, 3, 3, 7}, {2, 2, 5, 9, 12}, {12}, {4, 11}})
    for (auto [q, k] :
         std::vector<std::pair<int64_t, int64_t>>{{12, 12}, {8, 12}, {12, 6}})
      for (auto [cv, pv] :
           std::vector<std::pair<int64_t, int64_t>>{{-1, 3}, {2, 0}, {5, 9}}) {
        TestEnv env;
        env.qLen = q;
        env.kLen = k;
        env.offs["doc"] = offs;
        env.scalars["c"] = cv;
        env.scalars["p"] = pv;
        envs.push_back(env);
      }
  auto facts = domain();
  for (int trial = 0; trial < 120; ++trial) {
    const Pred *rule = genRule(3);
    SCOPED_TRACE(rule->str());
    ASSERT_OK_AND_ASSIGN(DNF dnf, normalizeRule(ctx, rule));
    ASSERT_OK_AND_ASSIGN(auto slots, extractIntervals(ctx, dnf));
    auto out = canonicalizeSlots(ctx, slots, facts);
    ASSERT_LE(out.size(), slots.size());
    for (TestEnv env : envs)
      for (env.i = 0; env.i < env.qLen; ++env.i)
        ASSERT_EQ(showKeys(visibleKeys(out, env)),
                  showKeys(visibleKeys(rule, env)))
            << "row " << env.i << " q_len=" << env.qLen << " k_len=" << env.kLen
            << "\nslots:\n"
            << showSlots(slots) << "canonical:\n"
            << showSlots(out);
  }
}

} // namespace
