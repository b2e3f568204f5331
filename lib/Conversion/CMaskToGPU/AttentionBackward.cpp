//===- AttentionBackward.cpp - Descriptor-driven attention backward -------===//
//
// The sm_90a backward (Attention.h: buildAttentionBackward), from the same
// building blocks as the forward (HopperEmitter.h). Three kernels:
//
//   <name>_pre  one thread per (query row, head): delta = rowsum(dO * O),
//               mlse = -LSE * log2(e) (both fp32 [heads, total_q]), and the
//               row's fp32 dQ accumulator [total_q, heads, D] zeroed.
//   <name>      one CTA per (key tile of 128 keys, key/value head), heads
//               outermost: walks the column direction's list of non-empty
//               query tiles (64 queries) for every query head of its group:
//                 S^T = K Q^T, dP^T = V dO^T          (wgmma m64n64)
//                 P^T = 2^(S^T scale log2e + mlse), dS^T = P^T (dP^T - delta)
//                 (partial tiles, or tiles crossing q_len / k_len: masked
//                 with the column intervals, as the forward masks rows)
//                 dV += P^T dO, dK += dS^T Q           (wgmma m64nD)
//                 dQ += dS K                           (wgmma m64n64, fp32
//                                                       atomics in global)
//               then writes dK * scale and dV. Deterministic for dK and dV;
//               dQ's fp32 sums depend on the order of the atomics.
//   <name>_dq   dQ = scale * dQacc in the element type.
//
// Shared memory (bytes from a 1024-aligned base; 128B-swizzled boxes):
//   K, V   [D/64] boxes of 128 x 64                 2 * 128 * D * 2
//   stages [stage] {Q, dO: [D/64] boxes 64 x 64}    stages * 2 * 64 * D * 2
//   LD     [stage] {mlse, delta: 64 f32}            stages * 512
//   P^T    [wg 2] 64 x 64                           16 KB
//   dS^T   [buffer 2][wg 2] 64 x 64                 32 KB
//
// NOT YET RUN ON A GPU: built and assembled (ptxas) only; the runtime and
// the Python package do not launch it yet (issue 5). ptxas: D = 64 without
// spills, D = 128 with 12 bytes.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "HopperEmitter.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cmask;

std::string BackwardVariant::kernelName(llvm::StringRef prefix) const {
  return (prefix + "_bwd_" + stringifyElementType(dtype) + "_d" + llvm::Twine(headDim)).str();
}

namespace {
/// Byte offsets of the backward's shared memory.
struct BackwardLayout {
  int64_t kv, qBox, stage, stages, qdOff, ldOff, pOff, dsOff, total;
  explicit BackwardLayout(const BackwardVariant &v) {
    kv = 128 * v.headDim * 2;
    qBox = 64 * v.headDim * 2; // one of Q or dO per stage
    stage = 2 * qBox;
    stages = 2;
    qdOff = 2 * kv;
    ldOff = qdOff + stages * stage;
    pOff = (ldOff + stages * 512 + 1023) / 1024 * 1024;
    dsOff = pOff + 2 * 8192;
    total = dsOff + 4 * 8192 + 2048;
  }
};
} // namespace

int64_t BackwardVariant::sharedBytes() const { return BackwardLayout(*this).total; }

std::optional<std::string> mlir::cmask::checkBackwardVariant(const BackwardVariant &v) {
  if (v.headDim != 64 && v.headDim != 128)
    return "head dimension " + std::to_string(v.headDim) + " (supported: 64, 128)";
  if (v.numSlots < 1 || v.numSlots > kMaxDescriptorSlots)
    return "column slot count " + std::to_string(v.numSlots);
  if (v.sharedBytes() > AttentionVariant::kMaxSharedBytes)
    return "shared memory";
  return std::nullopt;
}

namespace {

class BackwardBuilder : public HopperEmitter {
public:
  BackwardBuilder(OpBuilder &b, Location loc, const BackwardVariant &v)
      : HopperEmitter(b, loc), v(v), lay(v) {
    elt = v.dtype == ElementType::BF16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    wgmmaType = v.dtype == ElementType::BF16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    dBoxes = v.headDim / 64;
    acc64 = accumulatorType(32);
    accD = accumulatorType(v.headDim / 2);
  }

  void buildPre(gpu::GPUFuncOp func);
  void buildMain(gpu::GPUFuncOp func);
  void buildConvert(gpu::GPUFuncOp func);

private:
  Value view(Value byteOffset, ArrayRef<int64_t> shape, Type element) {
    return sharedView(smem, byteOffset, shape, element);
  }
  /// The global thread index of a 1-D launch.
  Value globalThread() {
    Value bid = idxTo(i64, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    Value dim = idxTo(i64, gpu::BlockDimOp::create(b, loc, gpu::Dimension::x));
    Value tid = idxTo(i64, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    return add(mul(bid, dim), tid);
  }

  void producer();
  void consumer();
  /// (stage index, consumer parity) of step t.
  std::pair<Value, Value> stageOf(Value t);
  /// One query tile: returns dV, dK.
  std::pair<Value, Value> step(Value t, Value dV, Value dK);
  /// The thread's two fragment rows (keys): the i64 index of their column
  /// slots and whether they are inside k_len (past it: the last key's
  /// slots; their gradients are dropped and they are masked out of dQ).
  void keyRows(Value ivRow[2], Value keyValid[2]) {
    for (int h = 0; h < 2; ++h) {
      Value key = add(sub(kTileRow, kStart), add(mul(wg, c32(64)), add(r0, c32(8 * h))));
      keyValid[h] = cmpi(arith::CmpIPredicate::slt, key, kLen);
      Value clamped = mins(key, sub(kLen, c32(1)));
      ivRow[h] = mul(sext64(add(kStart, clamped)), c64(v.numSlots));
    }
  }
  /// head and entry word of step t.
  std::pair<Value, Value> stepTarget(Value t);

  const BackwardVariant &v;
  BackwardLayout lay;
  Type elt, acc64, accD;
  NVVM::WGMMATypes wgmmaType;
  int64_t dBoxes;

  // Kernel-wide values.
  Value tmQ, tmK, tmV, tmdO, tmMlse, tmDelta, gdQ, gdK, gdV, gIv, gEntries;
  Value numHeads, kvGroup, dkToken, dkHead, dvToken, dvHead, totalQ, scaleLog2, scale;
  Value tid, wg, kvHead, qStart, qLen, kStart, kLen, kTileRow, entryBase, numEntries, steps;
  Value smem, pad, barKV, full, empty;
  // Consumer values.
  /// The shared base's descriptor address bits (addr >> 4): K's region.
  Value isLane0, lane2q, r0, addrBits, ldBase, pStore, dsStore, syncId;
};

} // namespace

//===----------------------------------------------------------------------===//
// Pre-pass and dQ conversion (one thread per (query row, head)).
//===----------------------------------------------------------------------===//

void BackwardBuilder::buildPre(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (O, dO, LSE, mlse, delta, dQacc, total_q i64, heads i32, ld_stride i64,
  //  o_token, o_head, do_token, do_head i64); mlse and delta are
  //  [heads, ld_stride] (ld_stride >= total_q, a multiple of 4 for TMA).
  Value gO = global(arg(0)), gdO = global(arg(1)), gLSE = global(arg(2));
  Value gMlse = global(arg(3)), gDelta = global(arg(4)), gAcc = global(arg(5));
  Value total = arg(6), heads = zext64(arg(7)), ldStride = arg(8);
  Value x = globalThread();
  e.ifThen(cmpi(arith::CmpIPredicate::slt, x, mul(total, heads)), [&] {
    Value row = arith::DivUIOp::create(b, loc, x, heads);
    Value head = arith::RemUIOp::create(b, loc, x, heads);
    Value oRow = gep(gO, add(mul(row, arg(9)), mul(head, arg(10))), elt);
    Value dRow = gep(gdO, add(mul(row, arg(11)), mul(head, arg(12))), elt);
    auto pairType = VectorType::get({2}, elt);
    Value sum = cF32(0.0);
    for (int64_t d = 0; d < v.headDim; d += 2) {
      Value o = arith::ExtFOp::create(b, loc, VectorType::get({2}, f32),
                                      load(pairType, gepBytes(oRow, 2 * d), 4));
      Value g = arith::ExtFOp::create(b, loc, VectorType::get({2}, f32),
                                      load(pairType, gepBytes(dRow, 2 * d), 4));
      for (int64_t k = 0; k < 2; ++k)
        sum = fma(vector::ExtractOp::create(b, loc, o, ArrayRef<int64_t>{k}),
                  vector::ExtractOp::create(b, loc, g, ArrayRef<int64_t>{k}), sum);
    }
    Value at = add(mul(head, ldStride), row);
    store(sum, gep(gDelta, at, f32));
    Value lse = load(f32, gep(gLSE, add(mul(head, total), row), f32), 4); // [heads, total_q]
    store(mulf(lse, cF32(-M_LOG2E)), gep(gMlse, at, f32));
    Value accRow = gep(gAcc, mul(x, c64(v.headDim)), f32); // [total_q, heads, D]
    Value zeros = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(VectorType::get({4}, f32), b.getF32FloatAttr(0.0)));
    for (int64_t d = 0; d < v.headDim; d += 4)
      LLVM::StoreOp::create(b, loc, zeros, gepBytes(accRow, 4 * d), 16);
  });
  gpu::ReturnOp::create(b, loc);
}

void BackwardBuilder::buildConvert(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (dQacc, dQ, total_q i64, heads i32, dq_token, dq_head i64, scale f32)
  Value gAcc = global(arg(0)), gdQ = global(arg(1));
  Value total = arg(2), heads = zext64(arg(3));
  Value x = globalThread();
  e.ifThen(cmpi(arith::CmpIPredicate::slt, x, mul(total, heads)), [&] {
    Value row = arith::DivUIOp::create(b, loc, x, heads);
    Value head = arith::RemUIOp::create(b, loc, x, heads);
    Value accRow = gep(gAcc, mul(x, c64(v.headDim)), f32);
    Value outRow = gep(gdQ, add(mul(row, arg(4)), mul(head, arg(5))), elt);
    for (int64_t d = 0; d < v.headDim; d += 2) {
      Value pair = load(VectorType::get({2}, f32), gepBytes(accRow, 4 * d), 8);
      Value lo = mulf(vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{0}), arg(6));
      Value hi = mulf(vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{1}), arg(6));
      store(packPair(lo, hi, elt), gepBytes(outRow, 2 * d));
    }
  });
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Main kernel.
//===----------------------------------------------------------------------===//

std::pair<Value, Value> BackwardBuilder::stageOf(Value t) {
  Value stage = remu(t, c32(lay.stages));
  Value round = divu(t, c32(lay.stages));
  Value parity = cmpi(arith::CmpIPredicate::eq, bitAnd(round, c32(1)), c32(1));
  return {stage, parity};
}

std::pair<Value, Value> BackwardBuilder::stepTarget(Value t) {
  // Query heads of the group outermost, the tile list inside.
  Value head = add(mul(kvHead, kvGroup), divu(t, numEntries));
  Value word = loadI32(gEntries, add(entryBase, remu(t, numEntries)));
  return {head, word};
}

void BackwardBuilder::producer() {
  Value lead = cmpi(arith::CmpIPredicate::eq, tid, c32(256));
  e.ifThen(lead, [&] {
    Value kvh = toIdx(kvHead);
    expectTx(barKV, cIdx(0), 2 * lay.kv);
    for (int64_t d = 0; d < dBoxes; ++d)
      for (auto [tm, off] : {std::pair<Value, int64_t>{tmK, 0}, {tmV, lay.kv}}) {
        Value dst = view(add(pad, cIdx(off + d * 16384)), {128, 1, 64}, elt);
        nvgpu::TmaAsyncLoadOp::create(b, loc, dst, barKV, tm,
                                      ValueRange{cIdx(64 * d), kvh, toIdx(kTileRow)}, cIdx(0),
                                      Value(), Value());
      }
    e.forEach(c64(0), sext64(steps), [&](Value t64) {
      Value t = trunc32(t64);
      auto [stage, consumerParity] = stageOf(t);
      Value parity = arith::XOrIOp::create(b, loc, consumerParity, e.cBool(true));
      auto [head, word] = stepTarget(t);
      Value qRow = add(qStart, mul(bitAnd(word, c32(0xffff)), c32(64)));
      Value s = toIdx(stage);
      Value stageOff = add(pad, toIdx(mul(stage, c32(lay.stage))));
      waitParity(empty, s, parity);
      expectTx(full, s, lay.stage + 512);
      Value h = toIdx(head);
      for (int64_t d = 0; d < dBoxes; ++d)
        for (auto [tm, off] : {std::pair<Value, int64_t>{tmQ, 0}, {tmdO, lay.qBox}}) {
          Value dst = view(add(stageOff, cIdx(lay.qdOff + off + d * 8192)), {64, 1, 64}, elt);
          nvgpu::TmaAsyncLoadOp::create(b, loc, dst, full, tm,
                                        ValueRange{cIdx(64 * d), h, toIdx(qRow)}, s, Value(),
                                        Value());
        }
      Value ldOff = add(pad, toIdx(add(mul(stage, c32(512)), c32(lay.ldOff))));
      for (auto [tm, off] : {std::pair<Value, int64_t>{tmMlse, 0}, {tmDelta, 256}}) {
        Value dst = view(add(ldOff, cIdx(off)), {1, 64}, f32);
        nvgpu::TmaAsyncLoadOp::create(b, loc, dst, full, tm, ValueRange{toIdx(qRow), h}, s,
                                      Value(), Value());
      }
    });
  });
}

std::pair<Value, Value> BackwardBuilder::step(Value t, Value dV, Value dK) {
  // Descriptor bases made opaque in the loop (see HopperEmitter::opaque).
  // One opaque copy of the address bits per step; every descriptor base
  // derives from it here (fewer values live across the loop).
  Value kRegion = opaque(addrBits);
  Value kMajor = bitOr(kRegion, c64(descriptorBits(16, 1024)));
  Value wgRows = mul(zext64(wg), c64(8192 >> 4)); // 64 rows of 128 B
  Value kBase = add(kMajor, wgRows);
  Value vBase = add(add(kMajor, c64(lay.kv >> 4)), wgRows);
  Value qdBase = add(kMajor, c64(lay.qdOff >> 4));
  Value pBase = add(add(kMajor, c64(lay.pOff >> 4)), wgRows);
  Value dsBase = add(kMajor, c64(lay.dsOff >> 4));
  auto [head, word] = stepTarget(t);
  TileEntry entry = decodeEntry(word, 64, qLen);
  // Keys past k_len (a key tile crossing it) must not reach dQ.
  Value crossesK = cmpi(arith::CmpIPredicate::sgt, add(sub(kTileRow, kStart), c32(128)), kLen);
  entry.needMask = arith::OrIOp::create(b, loc, entry.needMask, crossesK);
  auto [stage, parity] = stageOf(t);
  Value s = toIdx(stage);
  waitParity(full, s, parity);
  Value stageBytes = zext64(mul(stage, c32(lay.stage)));
  Value qDesc = add(qdBase, arith::ShRUIOp::create(b, loc, stageBytes, c64(4)));
  Value doDesc = add(qDesc, c64(lay.qBox >> 4));

  // The visibility words, before the wgmmas: computed between their issue
  // and wait (as the forward does), their temporaries would spill beside
  // the 192 accumulator registers in flight.
  Value ivRow[2], keyValid[2];
  keyRows(ivRow, keyValid);
  SmallVector<Value> first = firstSlots(entry, gIv, ivRow, qLen);
  SmallVector<Value> words = visibilityWords(entry, first, gIv, ivRow, 2, lane2q);

  // S^T = K_w Q^T and dP^T = V_w dO^T over D.
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  Value sAcc = LLVM::UndefOp::create(b, loc, acc64); // scale-d 0 first
  Value pAcc = sAcc;
  for (int64_t k = 0; k < v.headDim / 16; ++k) {
    int64_t kvStep = ((k / 4) * 16384 + (k % 4) * 32) >> 4;
    int64_t qStep = ((k / 4) * 8192 + (k % 4) * 32) >> 4;
    sAcc = wgmma(sAcc, add(kBase, c64(kvStep)), add(qDesc, c64(qStep)), 64, wgmmaType, k != 0,
                 /*bKMajor=*/true);
    pAcc = wgmma(pAcc, add(vBase, c64(kvStep)), add(doDesc, c64(qStep)), 64, wgmmaType, k != 0,
                 /*bKMajor=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);

  // P^T and dS^T on the fragments (row = key, column = query 8j + 2q + e),
  // 8 columns at a time: masked (partial tiles and tiles crossing q_len or
  // k_len only) and stored to shared memory, P^T at [wg], dS^T at
  // [t % 2][wg] (128B swizzle).
  SmallVector<Value> sv = extractAll(sAcc, 32), dpv = extractAll(pAcc, 32);
  Value ldStage = add(ldBase, mul(stage, c32(512)));
  Value buffer = bitAnd(t, c32(1));
  Value dsOff = mul(buffer, c32(2 * 8192));
  Value zero = cF32(0.0);
  for (int64_t j = 0; j < 8; ++j) {
    Value col = add(lane2q, c32(8 * j));
    auto ldPair = [&](int64_t off) {
      Value addr = add(ldStage, add(c32(off), mul(col, c32(4))));
      Value ptr = LLVM::IntToPtrOp::create(b, loc, sptr, zext64(addr));
      return load(VectorType::get({2}, f32), ptr, 8);
    };
    Value mlse = ldPair(0), delta = ldPair(256);
    SmallVector<Value> group; // p of the 4 elements, then their dS
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i) {
      Value m = vector::ExtractOp::create(b, loc, mlse, ArrayRef<int64_t>{i & 1});
      group.push_back(ex2(fma(sv[i], scaleLog2, m)));
    }
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i) {
      Value dl = vector::ExtractOp::create(b, loc, delta, ArrayRef<int64_t>{i & 1});
      group.push_back(mulf(group[i - 4 * j], arith::SubFOp::create(b, loc, dpv[i], dl)));
    }
    SmallVector<Type> types(8, f32);
    group = e.ifElse(
        entry.needMask, types,
        [&] {
          SmallVector<Value> out(8);
          for (int64_t i = 4 * j; i < 4 * j + 4; ++i) {
            int64_t half = (i >> 1) & 1, bit = 8 * (j % 4) + (i & 1);
            Value set = cmpi(arith::CmpIPredicate::ne,
                             bitAnd(words[half * 2 + j / 4], c32(int64_t(1) << bit)), c32(0));
            set = arith::AndIOp::create(b, loc, set, keyValid[half]);
            out[i - 4 * j] = select(set, group[i - 4 * j], zero);
            out[4 + i - 4 * j] = select(set, group[4 + i - 4 * j], zero);
          }
          return out;
        },
        [&] { return group; });
    Value chunk = mul(arith::XOrIOp::create(b, loc, bitAnd(r0, c32(7)), c32(j)), c32(16));
    for (int h = 0; h < 2; ++h) {
      Value off = add(chunk, c32(h * 1024));
      auto at = [&](Value base) {
        return LLVM::IntToPtrOp::create(b, loc, sptr, zext64(add(base, off)));
      };
      store(packPair(group[2 * h], group[2 * h + 1], elt), at(pStore));
      store(packPair(group[4 + 2 * h], group[4 + 2 * h + 1], elt), at(add(dsStore, dsOff)));
    }
  }
  asyncProxyBarrier(syncId, 256);

  // dV += P^T dO, dK += dS^T Q (k = 64 queries), dQ = dS K.
  Value dsDesc = add(dsBase, zext64(mul(buffer, c32((2 * 8192) >> 4))));
  Value mnDO = bitOr(bitAnd(doDesc, c64(0x3fff)), c64(descriptorBits(8192, 1024)));
  Value mnQ = bitOr(bitAnd(qDesc, c64(0x3fff)), c64(descriptorBits(8192, 1024)));
  Value dsOwn = add(dsDesc, mul(zext64(wg), c64(8192 >> 4)));
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t k = 0; k < 4; ++k) {
    dV = wgmma(dV, add(pBase, c64((k * 32) >> 4)), add(mnDO, c64((k * 2048) >> 4)),
               v.headDim, wgmmaType, true, /*bKMajor=*/false);
    dK = wgmma(dK, add(dsOwn, c64((k * 32) >> 4)), add(mnQ, c64((k * 2048) >> 4)), v.headDim,
               wgmmaType, true, /*bKMajor=*/false);
  }
  // dQ: D = 128: this warpgroup's 64 columns over all 128 keys (both
  // warpgroups' dS^T, read transposed); D = 64: all columns over its own
  // 64 keys (the two warpgroups' sums meet in the atomics).
  // The first k-step ignores its input (scale-d 0): undef, so that no zero
  // registers are set while other wgmmas are in flight.
  Value dqAcc = LLVM::UndefOp::create(b, loc, acc64);
  Value dsMN = bitOr(bitAnd(dsDesc, c64(0x3fff)), c64(descriptorBits(8192, 1024)));
  Value kMN = bitOr(kRegion, c64(descriptorBits(8192, 1024)));
  int64_t kSteps = v.headDim == 128 ? 8 : 4;
  for (int64_t k = 0; k < kSteps; ++k) {
    Value a, bk;
    if (v.headDim == 128) {
      a = add(dsMN, c64(((k / 4) * 8192 + (k % 4) * 2048) >> 4));
      // K's rows of this step, columns 64 wg .. 64 wg + 63 (the wg-th box).
      bk = add(add(kMN, c64((k * 2048) >> 4)), mul(zext64(wg), c64(16384 >> 4)));
    } else {
      a = add(add(dsMN, mul(zext64(wg), c64(8192 >> 4))), c64((k * 2048) >> 4));
      bk = add(kMN, c64(((k * 2048) >> 4)));
      bk = add(bk, mul(zext64(wg), c64(8192 >> 4)));
    }
    dqAcc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, acc64, dqAcc, a, bk, NVVM::MMAShapeAttr::get(ctx, 64, 64, 16), wgmmaType,
        wgmmaType, NVVM::WGMMATypes::f32,
        k == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
        NVVM::WGMMAScaleIn::one, /*A MN-major*/ NVVM::MMALayout::col,
        /*B MN-major*/ NVVM::MMALayout::row, NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  expectTx(empty, s, 0, isLane0);

  // dQ rows (queries) r0, r0 + 8 of the tile; columns as the fragments say.
  SmallVector<Value> dq = extractAll(dqAcc, 32);
  Value qTileStart = entry.tileStart;
  Value colBase = v.headDim == 128 ? mul(wg, c32(64)) : c32(0);
  for (int h = 0; h < 2; ++h) {
    Value q = add(qTileStart, add(r0, c32(8 * h)));
    e.ifThen(cmpi(arith::CmpIPredicate::slt, q, qLen), [&] {
      Value rowIndex = add(mul(sext64(add(qStart, q)), mul(zext64(numHeads), c64(v.headDim))),
                           mul(zext64(head), c64(v.headDim)));
      Value row = gep(gdQ, add(rowIndex, zext64(add(colBase, lane2q))), f32);
      for (int64_t j = 0; j < 8; ++j)
        for (int64_t e2 = 0; e2 < 2; ++e2)
          LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd,
                                    gepBytes(row, 4 * (8 * j + e2)), dq[4 * j + 2 * h + e2],
                                    LLVM::AtomicOrdering::monotonic);
    });
  }
  return {dV, dK};
}

void BackwardBuilder::consumer() {
  NVVM::SetMaxRegisterOp::create(b, loc, 240, NVVM::SetMaxRegisterAction::increase);
  Value lane = bitAnd(tid, c32(31));
  isLane0 = cmpi(arith::CmpIPredicate::eq, lane, c32(0));
  lane2q = mul(bitAnd(lane, c32(3)), c32(2));
  r0 = add(mul(bitAnd(shr(tid, c32(5)), c32(3)), c32(16)), shr(lane, c32(2)));
  Value base = idxTo(i64, add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem), pad));
  addrBits = bitAnd(arith::ShRUIOp::create(b, loc, base, c64(4)), c64(0x3fff));
  Value base32 = trunc32(base);
  ldBase = add(base32, c32(lay.ldOff));
  Value rowBytes = add(mul(r0, c32(128)), mul(bitAnd(lane, c32(3)), c32(4)));
  pStore = add(add(base32, c32(lay.pOff)), add(mul(wg, c32(8192)), rowBytes));
  dsStore = add(add(base32, c32(lay.dsOff)), add(mul(wg, c32(8192)), rowBytes));
  syncId = c32(1);

  Value zero = LLVM::ZeroOp::create(b, loc, accD);
  SmallVector<Value> grads = e.ifElse(
      cmpi(arith::CmpIPredicate::sgt, steps, c32(0)), {accD, accD},
      [&] {
        waitParity(barKV, cIdx(0), e.cBool(false));
        return e.loop(c64(0), sext64(steps), {zero, zero},
                      [&](Value t, SmallVector<Value> carried) {
                        auto [dV, dK] = step(trunc32(t), carried[0], carried[1]);
                        return SmallVector<Value>{dV, dK};
                      });
      },
      [&] { return SmallVector<Value>{zero, zero}; });

  // dK * scale and dV, rows r0 and r0 + 8 of this warpgroup's 64 keys.
  Value ivRow[2], keyValid[2];
  keyRows(ivRow, keyValid);
  SmallVector<Value> dv = extractAll(grads[0], v.headDim / 2);
  SmallVector<Value> dk = extractAll(grads[1], v.headDim / 2);
  for (int h = 0; h < 2; ++h) {
    Value key = add(sub(kTileRow, kStart), add(mul(wg, c32(64)), add(r0, c32(8 * h))));
    e.ifThen(keyValid[h], [&] {
      Value token = sext64(add(kStart, key));
      Value col = zext64(lane2q);
      Value kRow = gep(gdK, add(add(mul(token, dkToken), mul(zext64(kvHead), dkHead)), col), elt);
      Value vRow = gep(gdV, add(add(mul(token, dvToken), mul(zext64(kvHead), dvHead)), col), elt);
      for (int64_t j = 0; j < v.headDim / 8; ++j) {
        int64_t i = 4 * j + 2 * h;
        Value k0 = mulf(dk[i], scale);
        Value k1 = mulf(dk[i + 1], scale);
        store(packPair(k0, k1, elt), gepBytes(kRow, 16 * j));
        store(packPair(dv[i], dv[i + 1], elt), gepBytes(vRow, 16 * j));
      }
    });
  }
}

void BackwardBuilder::buildMain(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  tmQ = tensorMapArg(arg(0), {64, 1, 64}, elt, true);
  tmK = tensorMapArg(arg(1), {128, 1, 64}, elt, true);
  tmV = tensorMapArg(arg(2), {128, 1, 64}, elt, true);
  tmdO = tensorMapArg(arg(3), {64, 1, 64}, elt, true);
  tmMlse = tensorMapArg(arg(4), {1, 64}, f32, false);
  tmDelta = tensorMapArg(arg(5), {1, 64}, f32, false);
  gdQ = global(arg(6));
  gdK = global(arg(7));
  gdV = global(arg(8));
  Value cuQ = global(arg(9)), cuK = global(arg(10));
  gIv = global(arg(11));
  Value kTileSeq = global(arg(12)), kTileBase = global(arg(13)), counts = global(arg(14));
  Value offsets = global(arg(15));
  gEntries = global(arg(16));
  Value order = global(arg(17));
  numHeads = arg(18);
  kvGroup = arg(19);
  dkToken = arg(20);
  dkHead = arg(21);
  dvToken = arg(22);
  dvHead = arg(23);
  totalQ = arg(24);
  scaleLog2 = arg(25);
  scale = arg(26);

  tid = idxTo(i32, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value bid = idxTo(i32, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value kvHeads = divu(numHeads, kvGroup);
  Value perHead = divu(idxTo(i32, gpu::GridDimOp::create(b, loc, gpu::Dimension::x)), kvHeads);
  Value slot = remu(bid, perHead);
  Value numKTiles = loadI32(counts, c32(0));
  e.ifThen(cmpi(arith::CmpIPredicate::slt, slot, numKTiles), [&] {
    kvHead = divu(bid, perHead);
    Value kTile = loadI32(order, slot);
    Value seq = loadI32(kTileSeq, kTile);
    Value local = sub(kTile, loadI32(kTileBase, seq));
    kStart = loadI32(cuK, seq);
    kLen = sub(loadI32(cuK, add(seq, c32(1))), kStart);
    qStart = loadI32(cuQ, seq);
    qLen = sub(loadI32(cuQ, add(seq, c32(1))), qStart);
    kTileRow = add(kStart, mul(local, c32(128)));
    entryBase = loadI32(offsets, kTile);
    numEntries = sub(loadI32(offsets, add(kTile, c32(1))), entryBase);
    steps = mul(numEntries, kvGroup);
    // Warp-uniform (lane 0's), so that what derives from it can live in
    // uniform registers.
    wg = gpu::ShuffleOp::create(b, loc, shr(tid, c32(7)), c32(0), c32(32),
                                gpu::ShuffleMode::IDX)
             .getShuffleResult();

    barKV = barrierGroup(1);
    full = barrierGroup(lay.stages);
    empty = barrierGroup(lay.stages);
    e.ifThen(cmpi(arith::CmpIPredicate::eq, tid, c32(0)), [&] {
      nvgpu::MBarrierInitOp::create(b, loc, barKV, cIdx(1), cIdx(0), Value());
      for (int64_t s = 0; s < lay.stages; ++s) {
        nvgpu::MBarrierInitOp::create(b, loc, full, cIdx(1), cIdx(s), Value());
        nvgpu::MBarrierInitOp::create(b, loc, empty, cIdx(8), cIdx(s), Value());
      }
      for (Value tm : {tmQ, tmK, tmV, tmdO, tmMlse, tmDelta})
        nvgpu::TmaPrefetchOp::create(b, loc, tm, Value());
    });
    gpu::BarrierOp::create(b, loc);
    std::tie(smem, pad) = alignedSharedMemory();

    auto ifOp = scf::IfOp::create(b, loc, cmpi(arith::CmpIPredicate::eq, wg, c32(2)),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    NVVM::SetMaxRegisterOp::create(b, loc, 24, NVVM::SetMaxRegisterAction::decrease);
    e.ifThen(cmpi(arith::CmpIPredicate::sgt, steps, c32(0)), [&] { producer(); });
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    consumer();
  });
  gpu::ReturnOp::create(b, loc);
}

void mlir::cmask::buildAttentionBackward(gpu::GPUModuleOp gpuModule, llvm::StringRef name,
                                         const BackwardVariant &variant, Location loc) {
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32 = b.getF32Type();
  auto kernel = [&](llvm::StringRef suffix, SmallVector<Type> args, int32_t threads) {
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(b, loc, (name + suffix).str(),
                                       b.getFunctionType(args, {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    func->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({threads, 1, 1}));
    return func;
  };
  {
    auto func =
        kernel("_pre", {ptr, ptr, ptr, ptr, ptr, ptr, i64, i32, i64, i64, i64, i64, i64}, 128);
    BackwardBuilder(b, loc, variant).buildPre(func);
  }
  {
    SmallVector<Type> args(18, ptr);
    args.append({i32, i32, i64, i64, i64, i64, i64, f32, f32});
    auto func = kernel("", args, 384);
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
    func->setAttr(kTensorMapArgsAttr, b.getDenseI32ArrayAttr({0, 1, 2, 3, 4, 5}));
    BackwardBuilder(b, loc, variant).buildMain(func);
  }
  {
    auto func = kernel("_dq", {ptr, ptr, i64, i32, i64, i64, f32}, 128);
    BackwardBuilder(b, loc, variant).buildConvert(func);
  }
}
