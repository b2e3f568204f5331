//===- BackwardKeyTile.cpp - The backward's key-tile kernel ---------------===//
//
// BackwardKeyTile.h. A step's gradients (after BackwardWalk's P^T, dS^T):
//   dV += P^T dO                         (wgmma m64nD, P^T from registers,
//                                         under dS^T)
//   dK += dS^T Q                         (wgmma m64nD, dS^T from registers,
//                                         under the exchange of dS^T)
//   dQ += dS K                           (wgmma m64n64; each warp's 16
//                                         rows to shared memory, 4 KB, that
//                                         the dQ warp adds to the
//                                         accumulator with one bulk
//                                         reduction; red.add.v4.f32 in the
//                                         row-interval form)
// then dK * scale and dV are written. Deterministic for dK and dV; dQ's
// fp32 sums depend on the order of the reductions (`deterministic=True` runs
// the query-tile kernel for dQ instead, BackwardQueryTile.cpp).
//
//===----------------------------------------------------------------------===//

#include "BackwardKeyTile.h"
#include "BackwardKernels.h"

using namespace mlir;
using namespace mlir::cmask;
namespace bwd = ::cmask::abi::backward;

void KeyTileKernel::headArgs(Block &body) {
  auto arg = [&](int i) { return body.getArgument(i); };
  tmRingA = tensorMapArg(arg(bwd::TmQ), boxShape(sm90::kBoxRows), elt, true);
  tmFixA = tensorMapArg(arg(bwd::TmK), boxShape(kFixedRows), elt, true);
  tmFixB = tensorMapArg(arg(bwd::TmV), boxShape(kFixedRows), elt, true);
  tmRingB = tensorMapArg(arg(bwd::TmDO), boxShape(sm90::kBoxRows), elt, true);
  tmMlse = tensorMapArg(arg(bwd::TmMlse), {1, kLdBox}, f32, false);
  tmDelta = tensorMapArg(arg(bwd::TmDelta), {1, kLdBox}, f32, false);
  gdQ = global(arg(bwd::DQAccumulator));
  gdK = global(arg(bwd::DK));
  gdV = global(arg(bwd::DV));
}

void KeyTileKernel::build(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  headArgs(body);
  auto [cuQ, cuK] = walkArgs(body, bwd::CuSeqlensQ);
  numHeads = arg(bwd::NumHeads);
  kvGroup = arg(bwd::KvGroup);
  dkToken = arg(bwd::DKTokenStride);
  dkHead = arg(bwd::DKHeadStride);
  dvToken = arg(bwd::DVTokenStride);
  dvHead = arg(bwd::DVHeadStride);
  totalQ = arg(bwd::TotalQ);
  gUnits = global(arg(bwd::DQUnits));
  scaleLog2 = arg(bwd::ScaleLog2);
  scale = arg(bwd::Scale);
  // A KV head's CTAs read the query rows and dO of its group's heads and
  // add to their dQ accumulator (fp32).
  ringBytesPerHead = mul(mul(sext64(kvGroup), totalQ), c64(v.headDim * 8));
  buildWalk(cuK, cuQ, divu(numHeads, kvGroup));
}

void KeyTileKernel::loadStageExtras(Value stage, Value stageIdx, Value qRow,
                                    Value head) {
  Value ldOff =
      add(pad, toIndex(add(mul(stage, c32(kLdStageBytes)), c32(lay.ldOff))));
  Value ldRow = toIndex(bitAnd(qRow, c32(~int64_t(3))));
  for (auto [tm, off] :
       {std::pair<Value, int64_t>{tmMlse, 0}, {tmDelta, kLdDeltaOffset}}) {
    Value dst = view(add(ldOff, cIdx(off)), {1, kLdBox}, f32);
    nvgpu::TmaAsyncLoadOp::create(b, loc, dst, ring.full, tm,
                                  ValueRange{ldRow, head}, stageIdx, Value(),
                                  Value());
  }
}

void KeyTileKernel::consumerSetup() {
  // D = 128's dQ reads both warpgroups' dS^T: one barrier for both.
  dsSync = c32(sm90::kBarrierConsumers);
  dsSyncThreads = sm90::kConsumerThreads;
  if (!dqStaged())
    return;
  // The warp's dQ staging, and the thread's float4 in it (the
  // accumulator's order: lane order, 512 bytes per 8 columns).
  Value warp = bitAnd(shr(tid, c32(5)), c32(7));
  dqWarp = warpUniform(add(smemBase, c32(lay.dqOff)));
  dqTarget = add(dqWarp, add(c32(kDqStagingBytes), mul(warp, c32(8))));
  dqWarp = add(dqWarp, mul(warp, c32(kDqWarpBytes)));
  dqLane = add(dqWarp, mul(bitAnd(tid, c32(31)), c32(16)));
}

void KeyTileKernel::producerWarps() {
  // The dQ warp: each step, once the consumers have staged their dQ (the
  // warps' 4 KB and targets, kBarrierDqFull), one bulk operation per warp
  // (lanes 0-7, dqWarpStep), and the staging back to them once the engine
  // has read it (kBarrierDqEmpty). The proxy fence is this warp's, after
  // the barrier (the consumers' stores precede it in causality order): in
  // the consumers, between dQ and the next S^T, it cost 1-5% of
  // forward+backward (docs/performance.md, twenty-fifth session).
  if (!dqStaged())
    return;
  ifThen(eq(shr(tid, c32(5)), c32(kDqWriterWarp)), [&] {
    // It reads the units' words (or adds to the accumulator) the pre-pass
    // zeroes.
    gridDependencyWait();
    Value lane = bitAnd(tid, c32(31));
    Value staging = add(trunc32(sharedBase()), c32(lay.dqOff));
    Value from = add(staging, mul(lane, c32(kDqWarpBytes)));
    Value target = add(staging, add(c32(kDqStagingBytes), mul(lane, c32(8))));
    namedBarrierArrive(sm90::kBarrierDqEmpty, kDqSyncThreads);
    // Step 0's claims; each step's claims for the next after its own adds.
    Value zero = c32(0);
    Value claim0 = claimUnits(lane, {zero, zero},
                              cmp(arith::CmpIPredicate::sgt, steps, zero));
    loop(c64(0), sext64(steps), {zero, zero, claim0},
         [&](Value t64, SmallVector<Value> c) {
           namedBarrier(c32(sm90::kBarrierDqFull), kDqSyncThreads);
           asyncProxyFence();
           dqWarpStep(lane, from, target, c[2]);
           NVVM::SyncWarpOp::create(b, loc, c32(-1));
           Value more =
               cmp(arith::CmpIPredicate::slt, add(trunc32(t64), c32(1)), steps);
           ifThen(more, [&] {
             namedBarrierArrive(sm90::kBarrierDqEmpty, kDqSyncThreads);
           });
           ListPlace next = nextPlace({c[0], c[1]});
           Value claim = claimUnits(lane, next, more);
           // Reconverged before the next step's aligned barrier.
           NVVM::SyncWarpOp::create(b, loc, c32(-1));
           return SmallVector<Value>{next.e, next.round, claim};
         });
  });
}

Value KeyTileKernel::claimUnits(Value lane, ListPlace at, Value when) {
  // Lane w < 8: consumer warp w's unit of the step at `at` (its 16 rows
  // 16 (w % 4) of the query tile, columns 64 (w / 4)), as addGradients
  // targets it; counted where the warp's rows start inside the sequence.
  // Without a unit (another lane, past the last step or past q_len): -1.
  if (!::cmask::abi::backward::firstStore(v.headDim))
    return c32(-1);
  Value hasUnits = nonNull(gUnits);
  Value warpRow =
      add(mul(entryField(entryWord(at.e), ::cmask::abi::kEntryTile), c32(64)),
          mul(bitAnd(lane, c32(3)), c32(16)));
  Value counted = arith::AndIOp::create(
      b, loc, arith::AndIOp::create(b, loc, when, hasUnits),
      arith::AndIOp::create(b, loc,
                            cmp(arith::CmpIPredicate::ult, lane, c32(8)),
                            cmp(arith::CmpIPredicate::slt, warpRow, ringLen)));
  return ifElse(
      counted, TypeRange{i32},
      [&] {
        Value group = zext64(shr(add(qBase16, warpRow), c32(4)));
        Value chunk =
            add(mul(group, zext64(numHeads)), zext64(ringHead(at.round)));
        Value unit = add(mul(chunk, c64(16 * v.headDim * 4 /
                                        ::cmask::abi::backward::kUnitBytes)),
                         zext64(shr(lane, c32(2))));
        return SmallVector<Value>{
            asmValue("atom.acquire.gpu.global.add.u32 $0, [$1], 1;",
                     "=r,l,~{memory}", ValueRange{gep(gUnits, unit, i32)})};
      },
      [&] { return SmallVector<Value>{c32(-1)}; })[0];
}

void KeyTileKernel::dqWarpStep(Value lane, Value from, Value target,
                               Value claim) {
  Value issues = cmp(arith::CmpIPredicate::ult, lane, c32(8));
  Value to = ifElse(
      issues, TypeRange{i64},
      [&] { return SmallVector<Value>{load(i64, sharedAt(target), 8)}; },
      [&] { return SmallVector<Value>{c64(0)}; })[0];
  Value active = cmp(arith::CmpIPredicate::ne, to, c64(0));
  Value toPtr = LLVM::IntToPtrOp::create(b, loc, gptr, to);
  // Adds to the accumulator the pre-pass zeroed.
  auto reduce = [&](Value when) {
    ifThen(when, [&] {
      bulkReduceAdd(toPtr, from, kDqWarpBytes);
      bulkWaitRead();
    });
  };
  if (!::cmask::abi::backward::firstStore(v.headDim)) {
    reduce(active);
    return;
  }
  // Without dq_units (null: the runtime zeroed the accumulator), the same.
  Value hasUnits = nonNull(gUnits);
  reduce(arith::AndIOp::create(b, loc, active, bitNot(hasUnits)));
  active = arith::AndIOp::create(b, loc, active, hasUnits);
  // The first contribution to a unit (its word was 0) is stored, and its
  // word marked ready once the store has completed; the others wait for
  // that mark, then add (abi::backward::kUnitBytes). The first stores and
  // their marks come before any wait, and a step's units are claimed only
  // after the step before has finished its waits (claimUnits), so that no
  // warp waits on another CTA while a mark it owes is pending (two CTAs
  // first on one unit each of a query tile and waiting on the other's would
  // deadlock).
  static_assert(kDqWarpBytes == ::cmask::abi::backward::kUnitBytes,
                "a warp's staging is one accumulator unit");
  Value unit = arith::ShRUIOp::create(
      b, loc, sub(to, LLVM::PtrToIntOp::create(b, loc, i64, gdQ)),
      c64(llvm::Log2_64(::cmask::abi::backward::kUnitBytes)));
  Value word = gep(gUnits, unit, i32);
  Value ready = c32(int32_t(::cmask::abi::backward::kReady));
  // The count's old value, claimed during the step before (claimUnits):
  // 0 (first), with kReady (the store is done, acquired by the atomic
  // itself) or neither (wait for the mark).
  Value old = claim;
  Value first = arith::AndIOp::create(
      b, loc, active, cmp(arith::CmpIPredicate::eq, old, c32(0)));
  ifThen(first, [&] {
    bulkStore(toPtr, from, kDqWarpBytes);
    bulkWaitComplete();
    statement("red.release.gpu.global.or.b32 [$0], $1;", "l,r,~{memory}",
              ValueRange{word, ready});
  });
  ifThen(arith::AndIOp::create(b, loc, active, bitNot(first)), [&] {
    whileLoop(
        ValueRange{old}, TypeRange{},
        [&](SmallVector<Value> w) {
          return SmallVector<Value>{
              cmp(arith::CmpIPredicate::eq, bitAnd(w[0], ready), c32(0))};
        },
        [&](SmallVector<Value>) {
          statement("nanosleep.u32 64;", "~{memory}");
          return SmallVector<Value>{
              asmValue("ld.acquire.gpu.global.u32 $0, [$1];", "=r,l,~{memory}",
                       ValueRange{word})};
        });
    // The add (async proxy) after the acquire (generic proxy).
    statement("fence.proxy.async.global;", "~{memory}");
    bulkReduceAdd(toPtr, from, kDqWarpBytes);
  });
  ifThen(active, [&] { bulkWaitRead(); });
}

KeyTileKernel::QueryValues KeyTileKernel::queryValues(Value ldStage,
                                                      Value col) {
  // Per column (query) from the stage's row values.
  auto ldPair = [&](int64_t off) {
    // Scalar loads: the rows start 4 (q_start % 4) bytes into the box.
    Value addr = add(ldStage, add(c32(off), mul(col, c32(4))));
    std::array<Value, 2> pair;
    for (int64_t e2 = 0; e2 < 2; ++e2)
      pair[e2] = load(f32,
                      LLVM::IntToPtrOp::create(b, loc, sptr,
                                               zext64(add(addr, c32(4 * e2)))),
                      4);
    return pair;
  };
  QueryValues values;
  values.mlse = ldPair(0);
  values.delta = ldPair(kLdDeltaOffset);
  return values;
}

int64_t KeyTileKernel::withP(const StepOperands &g, ArrayRef<Value> p,
                             Value &dV) {
  // P^T's fragments are the A operand's (as the forward's P): k-step k
  // (queries 16k..16k+15) in packed registers 4k..4k+3.
  SmallVector<Value> packed;
  for (int64_t i = 0; i < int64_t(p.size()); i += 2)
    packed.push_back(packPairHere(p[i], p[i + 1]));
  Value mnDO = bitOr(descriptorAddress(g.doDesc), c64(sm90::kMNMajorBits));
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  accumulateFromRegisters(dV, packed, mnDO, g.first);
  return 1;
}

Value KeyTileKernel::gradients(const StepOperands &g) {
  // dQ = dS K (its own commit group, after dV's, before dK's; added to the
  // accumulator by addGradients once the next step's masking word is made).
  // dQ: D = 128: this warpgroup's 64 columns over all 128 keys (both
  // warpgroups' dS^T, read transposed); D = 64: all columns over its own
  // 64 keys (the two warpgroups' sums meet in the atomics).
  // The first k-step ignores its input (scale-d 0): undef, so that no zero
  // registers are set while other wgmmas are in flight.
  Value dqAcc = LLVM::UndefOp::create(b, loc, acc64);
  // MN-major descriptors: the address bits are summed and masked before the
  // layout bits are set (a sum that carries into the layout bits is
  // miscompiled by ptxas 13: the upper word of the constant was dropped).
  auto mnMajor = [&](Value region, Value offset) {
    return bitOr(descriptorAddress(add(region, offset)),
                 c64(sm90::kMNMajorBits));
  };
  Value dsRegion = descriptorAddress(g.dsDesc);
  Value wgRows = zext64(wg);
  int64_t kSteps = v.headDim == 128 ? 8 : 4;
  for (int64_t k = 0; k < kSteps; ++k) {
    Value a, bk;
    if (v.headDim == 128) {
      a = mnMajor(dsRegion,
                  descriptorOffset(sm90::mnMajorStep(k, sm90::kBoxBytes)));
      // K's rows of this step, columns 64 wg .. 64 wg + 63 (the wg-th box).
      bk = mnMajor(g.kRegion,
                   add(descriptorOffset(k * sm90::kStepBytesMN),
                       mul(wgRows, descriptorOffset(kFixedBoxBytes))));
    } else {
      Value rows = mul(wgRows, descriptorOffset(sm90::kBoxBytes));
      a = mnMajor(dsRegion,
                  add(rows, descriptorOffset(k * sm90::kStepBytesMN)));
      bk = mnMajor(g.kRegion,
                   add(rows, descriptorOffset(k * sm90::kStepBytesMN)));
    }
    dqAcc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, acc64, dqAcc, a, bk, NVVM::MMAShapeAttr::get(ctx, 64, 64, 16),
        wgmmaType, wgmmaType, NVVM::WGMMATypes::f32,
        k == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        /*A MN-major*/ NVVM::MMALayout::col,
        /*B MN-major*/ NVVM::MMALayout::row, NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return dqAcc;
}

void KeyTileKernel::addGradients(const StepOperands &g, Value dqAcc) {
  // dV and dQ done (dK, issued after dQ, may run on).
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
  // dQ rows (queries) r0, r0 + 8 of the tile, columns 8 j + 2 q + {0, 1}:
  // fragment values 4j .. 4j+3 are one float4 of the blocked accumulator
  // (file comment). Rows past q_len add zeros; a group whose first row is
  // past it adds nothing.
  SmallVector<Value> dq = extractAll(dqAcc, 32);
  Value colBase = v.headDim == 128 ? mul(wg, c32(64)) : c32(0);
  Value firstRow = add(g.entry.tileStart, r0);
  Value group = zext64(shr(add(qBase16, firstRow), c32(4)));
  Value chunk = mul(add(mul(group, zext64(numHeads)), zext64(g.head)),
                    c64(16 * v.headDim));
  if (!dqStaged()) {
    ifThen(cmp(arith::CmpIPredicate::slt, firstRow, ringLen), [&] {
      // The warp's float4s in lane order (lane 4 (r0 % 8) + q), 512
      // contiguous bytes per j, from float 16 c.
      Value lane = bitAnd(tid, c32(31));
      Value within =
          add(mul(zext64(colBase), c64(16)), mul(zext64(lane), c64(4)));
      Value at = gep(gdQ, add(chunk, within), f32);
      for (int64_t j = 0; j < 8; ++j)
        redAddV4(gepBytes(at, 4 * 128 * j),
                 ArrayRef<Value>(dq).slice(4 * j, 4));
    });
    return;
  }
  // Staged: the warp's 16 rows are one group of the accumulator, its 64
  // columns 4 KB there; the warp writes them to its staging in that order,
  // and lane 0 where they go (none past the sequence's end), for the dQ
  // warp (producerWarps), which hands them to the bulk-copy engine. The
  // staging is free once it has been read for the previous step.
  namedBarrier(c32(sm90::kBarrierDqEmpty), kDqSyncThreads);
  Type v4 = VectorType::get({4}, f32);
  Value lanePtr = sharedAt(dqLane);
  for (int64_t j = 0; j < 8; ++j)
    LLVM::StoreOp::create(b, loc,
                          vector::FromElementsOp::create(
                              b, loc, v4, ArrayRef<Value>(dq).slice(4 * j, 4)),
                          gepBytes(lanePtr, 4 * 128 * j), 16);
  Value warpRow = add(g.entry.tileStart, bitAnd(r0, c32(~int64_t(15))));
  ifThen(isLane0, [&] {
    Value at = gep(gdQ, add(chunk, mul(zext64(colBase), c64(16))), f32);
    Value to = select(cmp(arith::CmpIPredicate::slt, warpRow, ringLen),
                      LLVM::PtrToIntOp::create(b, loc, i64, at), c64(0));
    LLVM::StoreOp::create(b, loc, to, sharedAt(dqTarget), 8);
  });
  namedBarrierArrive(sm90::kBarrierDqFull, kDqSyncThreads);
}

void KeyTileKernel::storeGradients(Value dV, Value dK) {
  // dK * scale and dV of this warpgroup's 64 keys.
  storeFixedRows(dK, gdK, dkToken, dkHead, scale);
  storeFixedRows(dV, gdV, dvToken, dvHead, Value());
}

void mlir::cmask::buildBackwardKeyTile(OpBuilder &b, Location loc,
                                       const BackwardVariant &variant,
                                       gpu::GPUFuncOp func) {
  if (variant.rowTileK)
    KeyTileRowsKernel(b, loc, variant).build(func);
  else
    KeyTileKernel(b, loc, variant).build(func);
}
