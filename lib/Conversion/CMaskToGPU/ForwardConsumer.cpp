//===- ForwardConsumer.cpp - The attention forward's consumers ------------===//
//
// The forward's two consumer warpgroups (ForwardBuilder.h): the steps over an
// item's tile list (S, PV, the masking of partial tiles, the online
// softmax, column windows), the item loop and the epilogue
// (AttentionForward.cpp has the overview).
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cmask;
using namespace mlir::cmask::forward;

/// How far (log2 of the exponentials) a tile's row maximum must exceed the
/// running one before the running one moves (softmax()).
static constexpr double kRescaleLog2 = 8.0;

std::pair<Value, Value> ForwardBuilder::windowOf(const TileEntry &entry,
                                                 Value windowWord) {
  namespace abi_ = ::cmask::abi;
  Value shift = mul(windowHalf, c32(abi_::windowShift(1)));
  Value bound = c32((int64_t(1) << abi_::kWindowBoundBits) - 1);
  Value word = shr(windowWord, shift);
  Value lo = bitAnd(word, bound);
  Value hi = bitAnd(shr(word, c32(abi_::kWindowBoundBits)), bound);
  Value c0 = arith::MinUIOp::create(b, loc, bitAnd(lo, c32(~int64_t(15))),
                                    c32(v.tile.k - windowColumns));
  Value fits = cmp(arith::CmpIPredicate::ule, hi, add(c0, c32(windowColumns)));
  return {arith::AndIOp::create(b, loc, entry.isPartial, fits), c0};
}

Value ForwardBuilder::issueS(Value dK, const Keys &keys) {
  int64_t n = width(keys);
  // The window's first key row: c0 rows of 128 bytes into each box (c0 is a
  // multiple of 16: whole 8-row swizzle atoms).
  if (keys.window)
    dK = add(dK, mul(keys.c0, c32(sm90::kRowBytes >> sm90::kDescriptorShift)));
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  Value acc = LLVM::ZeroOp::create(b, loc, accumulatorType(n / 2));
  for (int64_t k = 0; k < v.headDim / 16; ++k) {
    // 16 columns of D per step: +32 B inside a 64-column box, then the
    // next box.
    Value qStep = descriptorOffset32(sm90::kMajorStep(k, sm90::kBoxBytes));
    Value kStep =
        descriptorOffset32(sm90::kMajorStep(k, v.tile.k * sm90::kRowBytes));
    acc = wgmma(acc, descriptor(add(descQItem, qStep), sm90::kKMajorBits),
                descriptor(add(dK, kStep), sm90::kKMajorBits), n, wgmmaType,
                /*accumulate=*/k != 0, /*bKMajor=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

Value ForwardBuilder::issuePV(Value acc, ValueRange p, Value dV,
                              const Keys &keys) {
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t k = 0; k < width(keys) / 16; ++k) {
    // 16 keys of V per step: 2 KB inside a 64-key box, then the next box;
    // in a window from key c0 on (k-step c0 / 16 + k of the tile).
    Value vStep;
    if (keys.window) {
      Value kk = add(divu(keys.c0, c32(16)), c32(k));
      Value bytes =
          add(mul(divu(kk, c32(sm90::kStepsPerRow)), c32(lay.vBox)),
              mul(remu(kk, c32(sm90::kStepsPerRow)), c32(sm90::kStepBytesMN)));
      vStep = shr(bytes, c32(sm90::kDescriptorShift));
    } else {
      vStep = descriptorOffset32(sm90::mnMajorStep(k, lay.vBox));
    }
    acc = wgmmaRegisterA(acc, p.slice(4 * k, 4),
                         descriptor(add(dV, vStep), sm90::kMNMajorBits),
                         v.headDim);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

SmallVector<Value> ForwardBuilder::maskApply(const Entry &entry,
                                             ValueRange words,
                                             SmallVector<Value> s) {
  int64_t n = s.size(), perHalf = words.size() / 2;
  SmallVector<Type> types(n, f32);
  return ifElse(
      entry.needMask, types,
      [&] {
        SmallVector<Value> out;
        for (int64_t i = 0; i < n; ++i) {
          int64_t j = i / 4, half = (i >> 1) & 1, bit = 8 * (j % 4) + (i & 1);
          Value set =
              cmp(arith::CmpIPredicate::ne,
                  bitAnd(words[half * perHalf + j / 4], c32(int64_t(1) << bit)),
                  c32(0));
          out.push_back(select(set, s[i], negInf));
        }
        return out;
      },
      [&] { return s; });
}

ForwardBuilder::Softmax ForwardBuilder::softmax(ValueRange s, Value m0,
                                                Value m1, Value l0, Value l1) {
  Softmax out;
  Value mOld[2] = {m0, m1}, lOld[2] = {l0, l1}, offset[2];
  for (int h = 0; h < 2; ++h) {
    Value x = rowReduce(SmallVector<Value>(s), h, /*isMax=*/true);
    Value mMax = maxf(mOld[h], quadReduce(x, /*isMax=*/true));
    // The row's maximum moves only when the tile's exceeds it by more than
    // 2^kRescaleLog2 in the exponentials (FlashAttention-4's Blackwell
    // threshold): P and l then stay below 2^kRescaleLog2 times their
    // usual bound, and O's rescale is skipped. From -inf it always moves
    // (+inf > the threshold); -inf to -inf gives NaN, not > it.
    Value grow = mulf(arith::SubFOp::create(b, loc, mMax, mOld[h]), scaleLog2);
    Value mNew = select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                              grow, cF32(kRescaleLog2)),
                        mMax, mOld[h]);
    // A row that has seen nothing yet keeps m = -inf: exponents relative
    // to 0 then give exp2(-inf) = 0, not NaN.
    Value isEmpty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, negInf);
    offset[h] = select(isEmpty, zeroF,
                       arith::NegFOp::create(b, loc, mulf(mNew, scaleLog2)));
    out.m[h] = mNew;
    // Exactly 1 where the maximum did not move (the rescale is then
    // skipped: consumerStep).
    Value same =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, mOld[h]);
    out.corr[h] =
        select(same, cF32(1.0), ex2(fma(mOld[h], scaleLog2, offset[h])));
  }
  SmallVector<Value> &p = out.p;
  for (int64_t i = 0; i < int64_t(s.size()); ++i)
    p.push_back(ex2(fma(s[i], scaleLog2, offset[(i >> 1) & 1])));
  for (int h = 0; h < 2; ++h) {
    Value sum = rowReduce(p, h, /*isMax=*/false);
    out.l[h] = fma(lOld[h], out.corr[h], sum);
  }
  return out;
}

Value ForwardBuilder::rowReduce(ArrayRef<Value> x, int h, bool isMax) {
  // Row half h of the accumulator: elements i with bit 1 of i equal to h.
  // In order: a tree measured no faster on the H200 (2026-12-01), nor 4
  // or 8 partial chains (FlashAttention-4's fmax_reduce) on an H100
  // (2026-12-06): the chain's waits run under the other warpgroup's
  // wgmmas (docs/performance.md).
  Value r;
  for (int64_t i = 0; i < int64_t(x.size()); ++i)
    if (((i >> 1) & 1) == h)
      r = r ? (isMax ? maxf(r, x[i]) : addf(r, x[i])) : x[i];
  return r;
}

SmallVector<Value> ForwardBuilder::packP(ArrayRef<Value> p) {
  // The accumulator's n8 chunk j holds (row r, columns 8j + 2q, +1) in
  // 4j, 4j + 1 and (row r + 8, the same columns) in 4j + 2, 4j + 3; the A
  // fragment of k-step k is (r, 16k + 2q), (r + 8, 16k + 2q),
  // (r, 16k + 8 + 2q), (r + 8, 16k + 8 + 2q): consecutive pairs.
  SmallVector<Value> regs;
  for (int64_t i = 0; i < int64_t(p.size()); i += 2)
    regs.push_back(packPairHere(p[i], p[i + 1]));
  return regs;
}

Value ForwardBuilder::rescale(Value acc, Value corr0, Value corr1) {
  for (int64_t i = 0; i < nO; ++i) {
    Value x = LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i});
    x = mulf(x, ((i >> 1) & 1) ? corr1 : corr0);
    acc = LLVM::InsertValueOp::create(b, loc, acc, x, ArrayRef<int64_t>{i});
  }
  return acc;
}

/// carried: as Carried lists, at step t. Returns those of step t + 1.
SmallVector<Value> ForwardBuilder::step(Value t, bool first,
                                        ValueRange carried) {
  Keys whole;
  if (!windowColumns)
    return consumerStep(t, first, carried, whole, whole);
  SmallVector<Type> types;
  for (Value x : carried)
    types.push_back(x.getType());
  Entry entry = decode(carried[kWord]);
  Value prevInWindow = cmp(arith::CmpIPredicate::sge, carried[kPrevC0], c32(0));
  // The windows' cases: a partial tile, or a step after a window. The
  // others (a full tile after a whole one: most steps of most masks) take
  // the plain step after one test.
  Value windowCase =
      first ? entry.isPartial
            : arith::OrIOp::create(b, loc, entry.isPartial, prevInWindow);
  auto windowCases = [&] {
    auto [inWindow, c0] = windowOf(entry, carried[kWindow]);
    auto body = [&](const Keys &cur) {
      if (first)
        return consumerStep(t, first, carried, cur, whole, true);
      return ifElse(
          prevInWindow, types,
          [&] {
            return consumerStep(t, first, carried, cur,
                                Keys{true, carried[kPrevC0]}, true);
          },
          [&] { return consumerStep(t, first, carried, cur, whole, true); });
    };
    return ifElse(
        inWindow, types, [&] { return body(Keys{true, c0}); },
        [&] { return body(whole); });
  };
  return ifElse(windowCase, types, windowCases, [&] {
    return consumerStep(t, first, carried, whole, whole, true);
  });
}

Value ForwardBuilder::lastPV(Value acc, ValueRange carried, Value dV,
                             bool windows) {
  ValueRange p = carried.drop_front(kP);
  auto pv = [&](const Keys &keys) {
    Value out = issuePV(acc, p, dV, keys);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    return SmallVector<Value>{out};
  };
  if (!windows)
    return pv(Keys())[0];
  return ifElse(
      cmp(arith::CmpIPredicate::sge, carried[kPrevC0], c32(0)), TypeRange{accO},
      [&] { return pv(Keys{true, carried[kPrevC0]}); },
      [&] { return pv(Keys()); })[0];
}

SmallVector<Value>
ForwardBuilder::consumerStep(Value t, bool first, ValueRange carried,
                             const Keys &cur, const Keys &prev, bool windows) {
  Entry entry = decode(carried[kWord]);
  ValueRange pPrev = carried.drop_front(kP);
  // The next step's entry and windows, loaded a step ahead: nothing waits
  // on them here.
  Value next = add(entryBase, mins(add(t, c32(1)), sub(numEntries, c32(1))));
  Value nextWord = loadI32(gEntries, next);
  Value nextWindow = windows ? loadI32(gWindows, next) : c32(0);
  SmallVector<Value> first2 = prefetchSlots(entry);
  auto [stage, parity, stageBytes] = stageOf(add(tBase, t), kRing);
  Value stageIdx = toIndex(stage);
  waitParity(kRing.full, stageIdx, parity);
  Value dK = add(descK, trunc32(shr(stageBytes, c64(sm90::kDescriptorShift))));
  Value prevStage, dV;
  Value acc = carried[kO];
  if (!first) {
    auto [ps, pParity, pBytes] = stageOf(add(tBase, sub(t, c32(1))), vRing);
    prevStage = toIndex(ps);
    waitParity(vRing.full, prevStage, pParity);
    dV = add(descV, trunc32(shr(pBytes, c64(sm90::kDescriptorShift))));
  }
  Value sAcc = issueS(dK, cur);
  // O, which the step before rescaled to step t-1's row maxima, takes
  // P(t-1)V(t-1) while S(t) runs.
  if (!first)
    acc = issuePV(acc, pPrev, dV, prev);
  SmallVector<Value> words = maskWords(entry, first2, cur);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, first ? 0 : 1);
  SmallVector<Value> s =
      maskApply(entry, words, extractAll(sAcc, width(cur) / 2));
  Softmax sm =
      softmax(s, carried[kM0], carried[kM1], carried[kL0], carried[kL1]);
  // K(t) is free once S(t) is done. Its release is predicated on a test
  // that always holds but depends on the row maxima (corr >= 0, or NaN):
  // ptxas keeps the wait for PV(t-1) below the release, so the softmax's
  // exponentials run under this warpgroup's own PV. Released right after
  // the S wait, it let ptxas hoist the PV wait above the row max
  // (docs/performance.md).
  Value corrOk = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGE,
                                       sm.corr[0], zeroF);
  expectTx(kRing.empty, stageIdx, 0,
           arith::AndIOp::create(b, loc, isLane0, corrOk));
  if (!first) {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    expectTx(vRing.empty, prevStage, 0, isLane0);
  }
  SmallVector<Value> pNext = packP(sm.p);
  // A window's P in the first registers of the tile's; the rest, unread,
  // keep what they hold (no instruction writes them).
  for (int64_t i = pNext.size(); i < nS / 2; ++i)
    pNext.push_back(pPrev[i]);
  // O, now with PV(t-1), to step t's row maxima (after the first step O is
  // still zero), in a step where one of the warp's row maxima moved; in the
  // others both corrections are exactly 1 in every lane, and a warp-uniform
  // branch skips the multiplies (fewer instructions beside the other
  // warpgroup's wgmmas: docs/performance.md, forty-first session).
  if (!first) {
    Value moved[2];
    for (int h = 0; h < 2; ++h)
      moved[h] = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                       sm.corr[h], cF32(1.0));
    Value anyRow = arith::OrIOp::create(b, loc, moved[0], moved[1]);
    Value anyMoved = NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), c32(-1),
                                              anyRow, NVVM::VoteSyncKind::any);
    Value accIn = acc;
    acc = ifElse(
        anyMoved, accIn.getType(),
        [&] {
          return SmallVector<Value>{rescale(accIn, sm.corr[0], sm.corr[1])};
        },
        [&] { return SmallVector<Value>{accIn}; })[0];
  }
  Value crossesFull =
      arith::AndIOp::create(b, loc, entry.isFull, entry.needMask);
  Value plainFull =
      arith::AndIOp::create(b, loc, entry.isFull, bitNot(entry.needMask));
  auto count = [&](Value sum, Value cond) {
    return add(sum, arith::ExtUIOp::create(b, loc, i32, cond));
  };
  SmallVector<Value> out = {acc,
                            sm.m[0],
                            sm.m[1],
                            sm.l[0],
                            sm.l[1],
                            count(carried[kPartial], entry.isPartial),
                            count(carried[kFull], plainFull),
                            count(carried[kBounded], crossesFull),
                            nextWord,
                            nextWindow,
                            cur.window ? cur.c0 : c32(-1)};
  out.append(pNext.begin(), pNext.end());
  return out;
}

void ForwardBuilder::epilogue(Value acc, Value m0, Value m1, Value l0,
                              Value l1) {
  Value ln2 = cF32(M_LN2), one = cF32(1.0);
  Value mFin[2] = {m0, m1}, lFin[2] = {l0, l1};
  Value inv[2], lse[2];
  for (int h = 0; h < 2; ++h) {
    Value l = quadReduce(lFin[h], /*isMax=*/false);
    // A row that saw nothing: l = 0, O = 0 * 1 and LSE = lg2(0) = -inf.
    Value empty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, zeroF);
    inv[h] = select(empty, one, arith::DivFOp::create(b, loc, one, l));
    Value lg = ptx("lg2.approx.f32 $0, $1;", f32, {l});
    lse[h] = mulf(fma(mFin[h], scaleLog2, lg), ln2);
  }
  // O's rows as element pairs, 16-byte stores
  // (HopperEmitter::storeAccumulatorRows), and each row's LSE.
  SmallVector<Value> o = extractAll(acc, nO);
  Value q = bitAnd(tid, c32(3));
  Value vectorOk = sixteenByteAligned(gO, {oTokenStride, oHeadStride});
  storeAccumulatorRows(
      o, v.headDim, {inv[0], inv[1]}, q, vectorOk,
      [&](int h) {
        return gep(gO,
                   add(mul(sext64(rowPos[h]), oTokenStride),
                       mul(sext64(rowHead[h]), oHeadStride)),
                   elt);
      },
      [&](int h) {
        return cmp(arith::CmpIPredicate::slt, sub(rowPos[h], qStart), qLen);
      },
      [&](int h) {
        ifThen(cmp(arith::CmpIPredicate::eq, q, c32(0)), [&] {
          Value at = add(mul(sext64(rowHead[h]), totalQ), sext64(rowPos[h]));
          store(lse[h], gep(gLSE, at, f32));
        });
      });
}

void ForwardBuilder::consumer() {
  consumerRegisters();
  Value lane = bitAnd(tid, c32(31));
  isLane0 = cmp(arith::CmpIPredicate::eq, lane, c32(0));
  Value warpInWG = bitAnd(shr(tid, c32(5)), c32(3));
  Value q = bitAnd(lane, c32(3));
  lane4q = mul(q, c32(2));
  // Fragment rows of the thread: r and r + 8 of its warpgroup's 64.
  Value r0 = add(mul(warpInWG, c32(16)), shr(lane, c32(2)));
  tileRow = add(mul(wg, c32(64)), r0);
  // wgmma descriptors: address bits from the shared base, then offsets.
  Value base = fromIndex(
      add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem), pad),
      i64);
  // Their low words, uniform (so ptxas keeps the wgmma operands in uniform
  // registers); the upper words are constants (descriptor()).
  Value addrBits = warpUniform(trunc32(descriptorAddressOf(base)));
  wgU = shr(warpUniform(shr(tid, c32(5))), c32(sm90::kWarpgroupShift - 5));
  Value kMajor = add(addrBits, c32(descriptorLow(sm90::kKMajorBits)));
  Value mnMajor = add(addrBits, c32(descriptorLow(sm90::kMNMajorBits)));
  descQ = add(kMajor, mul(wgU, descriptorOffset32(lay.qWG)));
  descK = add(kMajor, descriptorOffset32(lay.kOff));
  descV = add(mnMajor, descriptorOffset32(lay.vOff));
  negInf = cF32(-INFINITY);
  zeroF = cF32(0.0);

  // Debug counts of the tiles processed per state (stats != null).
  auto addStats = [&](ValueRange counts) {
    Value statsOn = nonNull(gStats);
    Value first = cmp(arith::CmpIPredicate::eq, tid, c32(0));
    ifThen(arith::AndIOp::create(b, loc, statsOn, first), [&] {
      for (int k = 0; k < 3; ++k)
        LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add,
                                  gep(gStats, c64(k), i32), counts[k],
                                  LLVM::AtomicOrdering::monotonic);
    });
  };
  if (!v.persistent) {
    // The CTA's own item (build() decoded it).
    tBase = c32(0);
    SmallVector<Value> fin = consumeItem(c32(0));
    epilogue(fin[kO], fin[kM0], fin[kM1], fin[kL0], fin[kL1]);
    addStats(ArrayRef<Value>(fin).slice(kPartial, 3));
    return;
  }
  // Carried over the items: the items received, the ring positions and
  // the Q loads so far, the tile counts (debug statistics).
  SmallVector<Type> carriedTypes(6, i32);
  SmallVector<Type> passed(kItemFields, i32);
  passed.append(carriedTypes);
  SmallVector<Value> counts = whileLoop(
      SmallVector<Value>(6, c32(0)), passed,
      [&](SmallVector<Value> c) {
        SmallVector<Value> r = receiveItem(items, c[0], isLane0);
        r.insert(r.begin(),
                 cmp(arith::CmpIPredicate::sge, r[kItemNumEntries], c32(0)));
        r.append(c);
        return r;
      },
      [&](SmallVector<Value> c) {
        ArrayRef<Value> item = ArrayRef<Value>(c).take_front(kItemFields);
        SmallVector<Value> carried(c.begin() + kItemFields, c.end());
        head = item[kItemHead];
        qTileRow = item[kItemQTileRow];
        qStart = item[kItemQStart];
        qLen = item[kItemQLen];
        kStart = item[kItemKStart];
        kLen = item[kItemKLen];
        entryBase = item[kItemEntryBase];
        numEntries = item[kItemNumEntries];
        tBase = carried[1];
        Value qUse = carried[2];
        SmallVector<Value> fin = consumeItem(qUse);
        epilogue(fin[kO], fin[kM0], fin[kM1], fin[kL0], fin[kL1]);
        Value has = cmp(arith::CmpIPredicate::sgt, numEntries, c32(0));
        SmallVector<Value> next = {
            add(carried[0], c32(1)), add(tBase, numEntries),
            add(qUse, arith::ExtUIOp::create(b, loc, i32, has))};
        for (int k = 0; k < 3; ++k)
          next.push_back(add(carried[3 + k], fin[kPartial + k]));
        return next;
      });
  addStats(ArrayRef<Value>(counts).slice(kItemFields + 3, 3));
}

SmallVector<Value> ForwardBuilder::consumeItem(Value qUse) {
  auto [firstHead, firstRow] = packedItem();
  windowHalf = shr(add(sub(firstRow, qTileRow),
                       mul(wgU, shr(c32(sm90::kBoxRows), qPackShift))),
                   c32(llvm::Log2_64(sm90::kBoxRows)));
  for (int h = 0; h < 2; ++h) {
    Value r = add(tileRow, c32(8 * h));
    rowPos[h] = add(firstRow, shr(r, qPackShift));
    rowHead[h] = add(firstHead, bitAnd(r, packMask));
    // Rows past q_len read the last row's slots (their output is dropped).
    Value i = sub(rowPos[h], qStart);
    i = mins(i, sub(qLen, c32(1)));
    ivRow[h] = mul(sext64(add(qStart, i)), c64(v.numSlots));
  }
  Value zeroAcc = LLVM::ZeroOp::create(b, loc, accO);
  Value zero32 = c32(0);
  SmallVector<Value> empty = {zeroAcc, negInf, negInf, zeroF,  zeroF,  zero32,
                              zero32,  zero32, zero32, zero32, c32(-1)};
  // P(-1): never read (the first step issues no PV).
  empty.append(nS / 2, zero32);
  // What an item leaves: the carried values before P (the last PV done).
  SmallVector<Value> none(empty.begin(), empty.begin() + kP);
  SmallVector<Type> types;
  for (Value x : none)
    types.push_back(x.getType());
  Value nonEmpty = cmp(arith::CmpIPredicate::sgt, numEntries, c32(0));
  return ifElse(
      nonEmpty, types,
      [&] {
        Value word = v.persistent ? loadI32(gEntries, entryBase) : firstWord;
        Value window = !windowColumns ? zero32
                       : v.persistent ? loadI32(gWindows, entryBase)
                                      : firstWindow;
        Value qSlot = remu(qUse, c32(lay.qSlots));
        descQItem =
            lay.qSlots == 1
                ? descQ
                : add(descQ, mul(qSlot, descriptorOffset32(lay.qBytes)));
        waitParity(barQ, toIndex(qSlot), parityOf(qUse, lay.qSlots));
        SmallVector<Value> start = empty;
        start[kWord] = word;
        start[kWindow] = window;
        // The item's steps, each in the shape step() picks (`windows`) or
        // all over whole tiles.
        auto steps = [&](bool windows) {
          auto one = [&](Value t, bool first, ValueRange carried) {
            Keys whole;
            return windows ? step(t, first, carried)
                           : consumerStep(t, first, carried, whole, whole);
          };
          SmallVector<Value> state = one(c32(0), /*first=*/true, start);
          state = loop(c64(1), sext64(numEntries), state,
                       [&](Value t, SmallVector<Value> carried) {
                         return one(trunc32(t), /*first=*/false, carried);
                       });
          // Every S of the item is done: Q may take the next item's.
          if (v.persistent)
            expectTx(emptyQ, toIndex(qSlot), 0, isLane0);
          // The last PV.
          Value tLast = sub(numEntries, c32(1));
          auto [stage, parity, stageBytes] = stageOf(add(tBase, tLast), vRing);
          Value stageIdx = toIndex(stage);
          waitParity(vRing.full, stageIdx, parity);
          Value dV =
              add(descV, trunc32(shr(stageBytes, c64(sm90::kDescriptorShift))));
          state[kO] = lastPV(state[kO], state, dV, windows);
          expectTx(vRing.empty, stageIdx, 0, isLane0);
          state.resize(kP);
          return state;
        };
        if (!windowColumns)
          return steps(false);
        // Windows where at least a quarter of the item's tiles are partial
        // (CLEAR's image rows: 33 of 37); the others keep the plain steps,
        // which the windows' dispatch slowed by 2-4% (docs/performance.md).
        Value useWindows = arith::AndIOp::create(
            b, loc, cmp(arith::CmpIPredicate::sgt, itemPartials, c32(0)),
            cmp(arith::CmpIPredicate::sge, mul(itemPartials, c32(4)),
                numEntries));
        return ifElse(
            useWindows, types, [&] { return steps(true); },
            [&] { return steps(false); });
      },
      [&] { return none; });
}
