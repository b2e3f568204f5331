//===- BackwardWalk.cpp - The walk the backward's tile kernels share ------===//
//
// BackwardWalk.h: the CTA (fixed tile, barriers, roles), the producer's
// ring, and a consumer step up to its gradient wgmmas, which each kernel
// adds (BackwardKeyTile.cpp, BackwardKeyTileRows.cpp,
// BackwardQueryTile.cpp).
//
//===----------------------------------------------------------------------===//

#include "BackwardWalk.h"

#include <optional>

using namespace mlir;
using namespace mlir::cmask;
namespace bwd = ::cmask::abi::backward;
namespace bwd_dqr = ::cmask::abi::backward_dq_rows;
namespace abi = ::cmask::abi;

//===----------------------------------------------------------------------===//
// The CTA.
//===----------------------------------------------------------------------===//

void BackwardWalk::buildWalk(Value cuFixed, Value cuRing, Value ctaHeads) {
  gCuFixed = cuFixed;
  tid = fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i32);
  bid = fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i32);
  // Programmatic dependent launch (docs/attention.md, Backward): the runtime
  // launches the key-tile kernels as the pre-pass's dependent, so that
  // their CTAs start under its last wave. Before gridDependencyWait they
  // read only what was written before the pre-pass began (the descriptor,
  // cu_seqlens, K and V); mlse, delta (the producer's ring loads; the
  // query-tile kernel's consumerSetup) and the dQ accumulator (the dQ
  // warp's reductions, the row-interval form's atomics) come after it. The dQ
  // conversion, launched as this kernel's dependent, may start once every CTA
  // has begun.
  launchDependents();
  // The CTA's fixed tile (`local` of sequence `seq`), then everything else.
  auto run = [&](Value seq, Value local, Value tile) {
    fixStart = loadI32(cuFixed, seq);
    fixLen = sub(loadI32(cuFixed, add(seq, c32(1))), fixStart);
    ringStart = loadI32(cuRing, seq);
    ringLen = sub(loadI32(cuRing, add(seq, c32(1))), ringStart);
    fixRow = add(fixStart, mul(local, c32(kFixedRows)));
    qBase16 = add(bitAnd(add(ringStart, c32(15)), c32(~int64_t(15))),
                  mul(seq, c32(16)));
    loadList(tile);
    // Warp-uniform (lane 0's), so that what derives from it can live in
    // uniform registers.
    wg = gpu::ShuffleOp::create(b, loc, shr(tid, c32(sm90::kWarpgroupShift)),
                                c32(0), c32(32), gpu::ShuffleMode::IDX)
             .getShuffleResult();

    barFixed = declareBarriers(1, 1);
    ring = declareRing(lay.stages);
    SmallVector<Value> maps{tmRingA, tmFixA, tmFixB, tmRingB};
    for (Value tm : {tmMlse, tmDelta})
      if (tm)
        maps.push_back(tm);
    initBarriers(tid, maps);
    setSteps(seq, local);
    splitRoles(
        wg,
        [&] {
          ifThen(cmp(arith::CmpIPredicate::sgt, steps, c32(0)), [&] {
            producer();
            producerWarps();
          });
        },
        [&] { consumer(); }, [&] { beforeProducerRegisters(); });
  };
  forEachCta(ctaHeads, run);
  // Every thread, the CTAs past the batch's tiles too: no CTA completes
  // before the pre-pass has, so whatever follows this grid in the stream
  // finds the pre-pass done: the dQ conversion (whose wait is for this
  // grid) its zeroed accumulator even where no CTA had work, the
  // deterministic dQ pass (a plain launch) its mlse and delta.
  gridDependencyWait();
  gpu::ReturnOp::create(b, loc);
}

void BackwardWalk::forEachCta(Value ctaHeads,
                              function_ref<void(Value, Value, Value)> run) {
  // The grid covers the batch's bound on tiles (abi::batchQTiles) x heads;
  // the batch has n tiles per head, in `order` heaviest first. Heads
  // outermost, each head's tiles heaviest first: the CTAs that run together
  // are mostly of one head and share its rows, dO and dQ accumulator in L2.
  // The last heads come interleaved (heads innermost, still heaviest
  // first), so that the launch ends on the lightest tiles of several heads
  // rather than on a late heavy tile of the last one (the tail): as many
  // heads as make the heaviest tile's work (entries) per SM, at most as
  // many as kInterleaveBytes of ringBytesPerHead cover (one at least).
  // On the H200, forward+backward against the heaviest quarter of every
  // head first (two runs): GQA 32/8 4K 1.31-1.36x, HSTU 4K 1.06-1.08x,
  // causal 4K-16K 1.02-1.06x, 8 x 1K and GQA 16K 1.02-1.03x, the other
  // shapes within the spread (docs/performance.md, sixteenth session). A
  // fixed eighth of the heads interleaved lost 3-5% at GQA 4K and RM 4K.
  Value numTiles = loadI32(gCounts, c32(0));
  // (order[0] is stale when the batch has no tiles: offsets[0] then.)
  Value heaviest = select(cmp(arith::CmpIPredicate::sgt, numTiles, c32(0)),
                          loadI32(gOrder, c32(0)), c32(0));
  Value maxEntries = sub(loadI32(gOffsets, add(heaviest, c32(1))),
                         loadI32(gOffsets, heaviest));
  Value allEntries = maxs(loadI32(gOffsets, numTiles), c32(1));
  Value sms = NVVM::SmDimOp::create(b, loc, i32);
  // ceil(sms maxEntries / allEntries), in 64 bits.
  Value byWork =
      trunc32(divu(add(mul(zext64(sms), zext64(maxs(maxEntries, c32(0)))),
                       zext64(sub(allEntries, c32(1)))),
                   zext64(allEntries)));
  Value bound = ctaHeads;
  if (ringBytesPerHead)
    bound = trunc32(arith::MinUIOp::create(
        b, loc, zext64(ctaHeads),
        divu(c64(kInterleaveBytes), maxs(ringBytesPerHead, c64(1)))));
  Value lastHeads =
      arith::MinUIOp::create(b, loc, maxs(bound, c32(1)), maxs(byWork, c32(1)));
  Value firstHeads = sub(ctaHeads, lastHeads);
  Value outer = mul(firstHeads, numTiles);
  Value inOuter = cmp(arith::CmpIPredicate::ult, bid, outer);
  Value rest = sub(bid, outer);
  Value slot = select(inOuter, remu(bid, numTiles), divu(rest, lastHeads));
  Value head = select(inOuter, divu(bid, numTiles),
                      add(firstHeads, remu(rest, lastHeads)));
  Value inBatch = cmp(arith::CmpIPredicate::ult, bid, mul(ctaHeads, numTiles));
  ifThen(inBatch, [&] {
    fixHead = head;
    Value tile = loadI32(gOrder, slot);
    Value seq = loadI32(gTileSeq, tile);
    run(seq, sub(tile, loadI32(gTileBase, seq)), tile);
  });
}

//===----------------------------------------------------------------------===//
// The producer and a consumer step.
//===----------------------------------------------------------------------===//

void BackwardWalk::producer() {
  Value lead = eq(tid, c32(sm90::kConsumerThreads));
  ifThen(lead, [&] {
    Value fixedHead = toIndex(fixHead);
    // The fixed tile: A and B, 128 rows.
    expectTx(barFixed, cIdx(0), 2 * lay.kv);
    for (int64_t d = 0; d < dBoxes; ++d)
      for (auto [tm, off] :
           {std::pair<Value, int64_t>{tmFixA, 0}, {tmFixB, lay.kv}}) {
        Value dst = view(add(pad, cIdx(off + d * kFixedBoxBytes)),
                         boxShape(kFixedRows), elt);
        nvgpu::TmaAsyncLoadOp::create(
            b, loc, dst, barFixed, tm,
            ValueRange{cIdx(64 * d), fixedHead, toIndex(fixRow)}, cIdx(0),
            Value(), Value());
      }
    // The fixed tile loads under the pre-pass's tail; the ring's mlse and
    // delta are the pre-pass's.
    gridDependencyWait();
    Value zero = c32(0);
    loop(c64(0), sext64(steps), {zero, zero},
         [&](Value t64, SmallVector<Value> at) {
           Value t = trunc32(t64);
           auto [stage, consumerParity] = stageOf(t);
           Value parity = producerParity(consumerParity);
           Value head = ringHead(at[1]), word = entryWord(at[0]);
           Value qRow =
               add(ringStart, mul(entryField(word, abi::kEntryTile), c32(64)));
           Value s = toIndex(stage);
           Value stageOff = add(pad, toIndex(mul(stage, c32(lay.stage))));
           waitParity(ring.empty, s, parity);
           // The step's tile: the two ring operands of 64 rows (Q and dO, K
           // and V), and what else the kernel loads with them.
           expectTx(ring.full, s, lay.stage + stageExtraBytes());
           Value h = toIndex(head);
           for (int64_t d = 0; d < dBoxes; ++d)
             for (auto [tm, off] : {std::pair<Value, int64_t>{tmRingA, 0},
                                    {tmRingB, lay.qBox}}) {
               Value dst = view(
                   add(stageOff, cIdx(lay.qdOff + off + d * sm90::kBoxBytes)),
                   boxShape(sm90::kBoxRows), elt);
               nvgpu::TmaAsyncLoadOp::create(
                   b, loc, dst, ring.full, tm,
                   ValueRange{cIdx(64 * d), h, toIndex(qRow)}, s, Value(),
                   Value());
             }
           loadStageExtras(stage, s, qRow, h);
           ListPlace next = nextPlace({at[0], at[1]});
           return SmallVector<Value>{next.e, next.round};
         });
  });
}

BackwardWalk::Bases BackwardWalk::bases() {
  // One opaque copy of the address bits per step; every descriptor base
  // derives from it here (fewer values live across the loop).
  Bases d;
  d.kRegion = opaque(addrBits);
  Value kMajor = bitOr(d.kRegion, c64(sm90::kKMajorBits));
  // The warpgroup's 64 rows.
  Value wgRows = mul(zext64(wg), descriptorOffset(sm90::kBoxBytes));
  d.kBase = add(kMajor, wgRows);
  d.vBase = add(add(kMajor, descriptorOffset(lay.kv)), wgRows);
  d.qdBase = add(kMajor, descriptorOffset(lay.qdOff));
  d.dsBase = add(kMajor, descriptorOffset(lay.dsOff));
  return d;
}

Value BackwardWalk::issueScores(const Bases &d, Value t, Value wait, bool dP) {
  auto [stage, parity] = stageOf(t);
  if (wait)
    ifThen(wait, [&] { waitParity(ring.full, toIndex(stage), parity); });
  Value qDesc = add(
      d.qdBase, zext64(mul(stage, c32(lay.stage >> sm90::kDescriptorShift))));
  Value fixed = d.kBase, ringOperand = qDesc;
  if (dP) {
    fixed = d.vBase;
    ringOperand = add(qDesc, descriptorOffset(lay.qBox));
  }
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  Value acc = LLVM::UndefOp::create(b, loc, acc64); // scale-d 0 first
  for (int64_t k = 0; k < v.headDim / 16; ++k) {
    int64_t kvStep = sm90::kMajorStep(k, kFixedBoxBytes);
    int64_t qStep = sm90::kMajorStep(k, sm90::kBoxBytes);
    acc = wgmma(acc, add(fixed, descriptorOffset(kvStep)),
                add(ringOperand, descriptorOffset(qStep)), 64, wgmmaType,
                k != 0, /*bKMajor=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

BackwardWalk::TileEntry BackwardWalk::stepEntry(Value word) {
  TileEntry entry = decodeEntry(word, 64, ringLen);
  // Fixed rows past the sequence (a fixed tile crossing its end) are masked
  // out: keys past k_len must not reach dQ (nor queries past q_len dK).
  Value crosses = cmp(arith::CmpIPredicate::sgt,
                      add(sub(fixRow, fixStart), c32(128)), fixLen);
  entry.needMask = arith::OrIOp::create(b, loc, entry.needMask, crosses);
  return entry;
}

Value BackwardWalk::maskWord(Value word) {
  TileEntry entry = stepEntry(word);
  Value ivRow[2], fixValid[2];
  fixedRows(ivRow, fixValid);
  SmallVector<Value> first = firstSlots(entry, gIv, ivRow, ringLen);
  SmallVector<Value> words =
      visibilityWords(entry, first, gIv, ivRow, 2, lane2q);
  Value packed = c32(0);
  for (auto [i, w] : llvm::enumerate(words))
    packed =
        bitOr(packed, arith::ShLIOp::create(b, loc, bitAnd(w, c32(0x03030303)),
                                            c32(2 * int64_t(i))));
  return packed;
}

SmallVector<Value> BackwardWalk::step(Value t, ValueRange carried, bool first) {
  Value dV = carried[0], dK = carried[1], word = carried[2], sAcc = carried[3];
  Value words = carried[4];
  ListPlace at{carried[5], carried[6]};
  // The next step's entry word now, used at the end of the step (its
  // masking word) and in the next step (past the last step: entry 0, a
  // valid word whose scores are dropped).
  ListPlace next = nextPlace(at);
  Value nextWord = entryWord(next.e);
  Value head = ringHead(at.round);
  TileEntry entry = stepEntry(word);
  Value stage = stageOf(t).first;

  // S^T(t) and the previous step's gradients complete: the previous step's
  // stage is free.
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  Value prevStage = stageOf(add(t, c32(lay.stages - 1))).first;
  expectTx(ring.empty, toIndex(prevStage), 0,
           arith::AndIOp::create(b, loc, isLane0,
                                 cmp(arith::CmpIPredicate::sgt, t, c32(0))));

  Value ivRow[2], fixValid[2];
  fixedRows(ivRow, fixValid);

  // P^T and dS^T on the fragments (row = key, column = query 8j + 2q + e;
  // the query-tile kernel: P and dS, row = query, column = key),
  // 8 columns at a time: P^T masked (partial tiles and tiles crossing q_len
  // or k_len only) and kept in registers; dS^T stored to shared memory at
  // [t % 2][wg] (128B swizzle).
  Value ldStage = add(ldBase, mul(stage, c32(kLdStageBytes)));
  Value buffer = bitAnd(t, c32(1));
  Value dsOff = mul(buffer, c32(2 * sm90::kBoxBytes));
  Value zero = cF32(0.0);
  // The operands of the kernel's wgmmas, their descriptor bases from a
  // fresh opaque copy at each use (not kept live across the elementwise
  // part).
  auto operandsOf = [&] {
    Bases d = bases();
    Value qDesc = add(
        d.qdBase, zext64(mul(stage, c32(lay.stage >> sm90::kDescriptorShift))));
    Value dsDesc =
        add(d.dsBase, zext64(mul(buffer, c32((2 * sm90::kBoxBytes) >>
                                             sm90::kDescriptorShift))));
    return StepOperands{
        d.kRegion,
        qDesc,
        add(qDesc, descriptorOffset(lay.qBox)),
        dsDesc,
        bitOr(descriptorAddress(qDesc), c64(sm90::kMNMajorBits)),
        head,
        entry,
        first};
  };
  // dP^T(t) now (its stage is S^T's), P^T while it runs: masked, in
  // registers for the kernel's withP. (dP^T issued with S^T at the end
  // of the step before, in flight across the loop's turn, made ptxas
  // serialize the wgmmas.)
  Value pAcc = issueScores(bases(), t, Value(), /*dP=*/true);
  SmallVector<Value> sv = extractAll(sAcc, 32), pv(32);
  // -LSE log2(e) and delta of the elements' queries (the kernel's; each
  // pass uses one of them, the other's loads fold away: delta kept across
  // the wait spilled at D = 128).
  auto values = [&](int64_t j) {
    return queryValues(ldStage, add(lane2q, c32(8 * j)));
  };
  for (int64_t j = 0; j < 8; ++j) {
    std::array<Value, 2> mlse = values(j).mlse;
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i)
      pv[i] = ex2(fma(sv[i], scaleLog2, mlse[queryOf(i)]));
  }
  // One branch for the tile (one per group of 4 cost a predicate copy and
  // a branch each in the chain before dV's issue).
  pv = ifElse(
      entry.needMask, SmallVector<Type>(32, f32),
      [&] {
        SmallVector<Value> out(32);
        for (int64_t i = 0; i < 32; ++i) {
          int64_t j = i / 4, half = (i >> 1) & 1, bit = 8 * (j % 4) + (i & 1);
          Value set = cmp(
              arith::CmpIPredicate::ne,
              bitAnd(words, c32(int64_t(1) << (bit + 2 * (half * 2 + j / 4)))),
              c32(0));
          set = arith::AndIOp::create(b, loc, set, fixValid[half]);
          out[i] = select(set, pv[i], zero);
        }
        return out;
      },
      [&] { return pv; });
  // What the kernel does with P^T (the key-tile kernel: dV += P^T dO from
  // registers, under the wait for dP^T and the dS^T below).
  int64_t issued = withP(operandsOf(), pv, dV);
  // dS^T = P^T (dP^T - delta): zero where P^T was masked as long as
  // dP^T - delta is finite, i.e. for finite V and dO (no select: as the
  // forward's O = P V, whose zero P times a non-finite V row is NaN too).
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, issued);
  // Packed in element pairs: stored (stmatrix) if the kernel shares
  // dS^T, then the A fragments of withDs's wgmmas, issued at once (their
  // registers free before the exchange).
  SmallVector<Value> dpv = extractAll(pAcc, 32), dsPairs;
  for (int64_t j = 0; j < 8; ++j) {
    std::array<Value, 2> delta = values(j).delta;
    SmallVector<Value> ds;
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i)
      ds.push_back(mulf(
          pv[i], arith::SubFOp::create(b, loc, dpv[i], delta[queryOf(i)])));
    for (int h = 0; h < 2; ++h)
      dsPairs.push_back(packPairHere(ds[2 * h], ds[2 * h + 1]));
  }
  // dS^T's stores are issued before the wgmmas that read the same
  // registers as their A operand: PTX leaves any access to an in-flight
  // wgmma's A registers undefined, reads included.
  // Four stmatrix of four 8 x 8 matrices each: the m-th stores column
  // groups j = 2m, 2m + 1 of both row halves (dsPairs[4m .. 4m + 3]); each
  // lane gives one matrix row's 16-byte chunk (dsStore, dsChunk).
  if (dsSyncThreads != 0)
    for (int64_t m = 0; m < 4; ++m) {
      Value chunk = bitXor(dsChunk, c32(2 * m * sm90::kChunkBytes));
      NVVM::StMatrixOp::create(
          b, loc, sharedAt(add(add(dsStore, dsOff), chunk)),
          ArrayRef<Value>(dsPairs).slice(4 * m, 4),
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
          NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
          NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    }
  // FlashAttention-4's order where dS^T is shared: the exchange, dQ (dS^T
  // from shared memory), then dK (from registers), so that dQ's staging
  // runs under dK.
  std::optional<StepOperands> g;
  Value pending;
  if (dsSyncThreads != 0) {
    asyncProxyBarrier(dsSync, dsSyncThreads);
    g = operandsOf();
  }
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  if (g)
    pending = gradients(*g);
  withDs(operandsOf(), dsPairs, dK);

  // The next step's masking word (while no score accumulator is live), then
  // its scores (past the last step: the stale stage, dropped).
  Value nextWords = maskWord(nextWord);
  if (pending) {
    // dV and dQ done, dK in flight (the most recent group).
    addGradients(*g, pending);
    // dK done before S^T's accumulator is live (both in flight exceed the
    // 240 registers: ptxas C7512).
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  }
  Value tNext = add(t, c32(1));
  Value sNext =
      issueScores(bases(), tNext, cmp(arith::CmpIPredicate::slt, tNext, steps));
  return {dV, dK, nextWord, sNext, nextWords, next.e, next.round};
}

void BackwardWalk::consumer() {
  beforeConsumerRegisters();
  consumerRegisters();
  Value lane = bitAnd(tid, c32(31));
  isLane0 = cmp(arith::CmpIPredicate::eq, lane, c32(0));
  lane2q = mul(bitAnd(lane, c32(3)), c32(2));
  r0 = add(mul(bitAnd(shr(tid, c32(5)), c32(3)), c32(16)), shr(lane, c32(2)));
  Value base = sharedBase();
  addrBits = descriptorAddressOf(base);
  Value base32 = trunc32(base);
  smemBase = base32;
  // The LD boxes start at the query tile's first row rounded down to a
  // multiple of 4 (tiles start at q_start + 64 i).
  ldBase =
      add(add(base32, c32(lay.ldOff)), mul(bitAnd(ringStart, c32(3)), c32(4)));
  // dS^T's stmatrix rows: lane 8 i + k gives row k of matrix i, which is
  // row half i % 2 (fragment rows r0, r0 + 8) of column group 2m + i / 2;
  // the row's 16-byte chunk of group j is j ^ (row % 8) (128B swizzle), so
  // that the m-th store's chunk is dsChunk ^ 2m.
  Value matrix = shr(lane, c32(3)), k = bitAnd(lane, c32(7));
  Value stRow = add(mul(bitAnd(shr(tid, c32(5)), c32(3)), c32(16)),
                    add(mul(bitAnd(matrix, c32(1)), c32(8)), k));
  Value wgBox = mul(wg, c32(sm90::kBoxBytes));
  dsStore = add(add(base32, c32(lay.dsOff)),
                add(wgBox, mul(stRow, c32(sm90::kRowBytes))));
  dsChunk = mul(bitXor(shr(matrix, c32(1)), k), c32(sm90::kChunkBytes));
  consumerSetup();

  Value zero = LLVM::ZeroOp::create(b, loc, accD);
  SmallVector<Value> grads = ifElse(
      cmp(arith::CmpIPredicate::sgt, steps, c32(0)), {accD, accD},
      [&] {
        // The first step's entry and masking word (global loads) while the
        // fixed tile arrives.
        Value word = entryWord(c32(0));
        Value words = maskWord(word);
        waitParity(barFixed, cIdx(0), cBool(false));
        // The steps add to the dQ accumulator that the pre-pass zeroes (the
        // row-interval form's atomics; staged, the dQ warp waits too).
        gridDependencyWait();
        Value s0 = issueScores(bases(), c32(0), cBool(true));
        // The first step peeled: dV and dK start with scale-d 0 (zeros set
        // while S^T and dP^T are in flight would serialize the wgmmas).
        Value undef = LLVM::UndefOp::create(b, loc, accD);
        SmallVector<Value> init{undef, undef, word, s0, words, c32(0), c32(0)};
        SmallVector<Value> out =
            loop(c64(1), sext64(steps), step(c32(0), init, /*first=*/true),
                 [&](Value t, SmallVector<Value> c) {
                   return step(trunc32(t), c, false);
                 });
        // The last dV and dK (and the dropped scores past the last step).
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
        return SmallVector<Value>{out[0], out[1]};
      },
      [&] { return SmallVector<Value>{zero, zero}; });

  storeGradients(grads[0], grads[1]);
}

void BackwardWalk::storeFixedRows(Value acc, Value out, Value tokenStride,
                                  Value headStride, Value mult) {
  // Rows r0 and r0 + 8 of the warpgroup's 64, 16-byte stores
  // (HopperEmitter::storeAccumulatorRows).
  Value ivRow[2], fixValid[2];
  fixedRows(ivRow, fixValid);
  storeAccumulatorRows(
      extractAll(acc, v.headDim / 2), v.headDim, {mult, mult},
      bitAnd(tid, c32(3)), sixteenByteAligned(out, {tokenStride, headStride}),
      [&](int h) {
        Value row = add(sub(fixRow, fixStart),
                        add(mul(wg, c32(64)), add(r0, c32(8 * h))));
        Value token = sext64(add(fixStart, row));
        return gep(
            out, add(mul(token, tokenStride), mul(zext64(fixHead), headStride)),
            elt);
      },
      [&](int h) { return fixValid[h]; });
}

std::pair<Value, Value> BackwardWalk::walkArgs(Block &body, int first) {
  // The same run of arguments in the key-tile and query-tile kernels.
  static_assert(bwd::TileOrder - bwd::CuSeqlensQ == 8 &&
                    bwd_dqr::TileOrder - bwd_dqr::CuSeqlensQ == 8 &&
                    bwd_dqr::QTileSeq - bwd_dqr::CuSeqlensQ ==
                        bwd::KTileSeq - bwd::CuSeqlensQ,
                "the walked direction's arguments");
  auto arg = [&](int i) {
    return global(body.getArgument(first + i - bwd::CuSeqlensQ));
  };
  gIv = arg(bwd::Intervals);
  gEntries = arg(bwd::TileEntries);
  Value cuQ = arg(bwd::CuSeqlensQ), cuK = arg(bwd::CuSeqlensK);
  gTileSeq = arg(bwd::KTileSeq);
  gTileBase = arg(bwd::KTileBase);
  gCounts = arg(bwd::Counts);
  gOffsets = arg(bwd::TileOffsets);
  gOrder = arg(bwd::TileOrder);
  return {cuQ, cuK};
}
