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
  // warps' 4 KB and targets, kBarrierDqFull), one bulk reduction per warp
  // (lanes 0-7), and the staging back to them once the engine has read it
  // (kBarrierDqEmpty). The proxy fence is this warp's, after the barrier
  // (the consumers' stores precede it in causality order): in the
  // consumers, between dQ and the next S^T, it cost 1-5% of
  // forward+backward (docs/performance.md, twenty-fifth session).
  if (!dqStaged())
    return;
  ifThen(eq(shr(tid, c32(5)), c32(kDqWriterWarp)), [&] {
    // Its reductions add to the accumulator the pre-pass zeroes.
    gridDependencyWait();
    Value lane = bitAnd(tid, c32(31));
    Value staging = add(trunc32(sharedBase()), c32(lay.dqOff));
    Value from = add(staging, mul(lane, c32(kDqWarpBytes)));
    Value target = add(staging, add(c32(kDqStagingBytes), mul(lane, c32(8))));
    Value issues = cmp(arith::CmpIPredicate::ult, lane, c32(8));
    namedBarrierArrive(sm90::kBarrierDqEmpty, kDqSyncThreads);
    loop(c64(0), sext64(steps), {}, [&](Value t64, SmallVector<Value>) {
      namedBarrier(c32(sm90::kBarrierDqFull), kDqSyncThreads);
      asyncProxyFence();
      ifThen(issues, [&] {
        Value to = load(i64, sharedAt(target), 8);
        ifThen(cmp(arith::CmpIPredicate::ne, to, c64(0)), [&] {
          bulkReduceAdd(LLVM::IntToPtrOp::create(b, loc, gptr, to), from,
                        kDqWarpBytes);
          bulkWaitRead();
        });
      });
      NVVM::SyncWarpOp::create(b, loc, c32(-1));
      ifThen(
          cmp(arith::CmpIPredicate::slt, add(trunc32(t64), c32(1)), steps),
          [&] { namedBarrierArrive(sm90::kBarrierDqEmpty, kDqSyncThreads); });
      return SmallVector<Value>{};
    });
  });
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
