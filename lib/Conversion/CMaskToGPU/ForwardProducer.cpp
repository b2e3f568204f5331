//===- ForwardProducer.cpp - The attention forward's producer -------------===//
//
// The forward's producer (ForwardBuilder.h): one thread streams Q, then K and
// V of each item's tile list; in the persistent kernel its warp claims,
// decodes and hands over the items (AttentionForward.cpp has the overview).
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

std::tuple<Value, Value, Value> ForwardBuilder::stageOf(Value t,
                                                        const Ring &ring) {
  RingSlot slot = slotOf(ring, t);
  return {slot.stage, slot.parity, mul(zext64(slot.stage), c64(lay.kvStage))};
}

void ForwardBuilder::decodeItem(Value item) {
  // Run by whole warps (every thread before the roles split; the persistent
  // producer's warp): every lane loads the same words, made uniform
  // (warpUniform) with what derives from them (TMA coordinates, the
  // entries' addresses).
  auto at = [&](Value buffer, Value i) {
    return warpUniform(loadI32(buffer, i));
  };
  // The grid kernel's items are heads outermost (build()). The persistent
  // kernel's come in sections of sectionHeads heads (the last one may have
  // fewer), heads innermost in a section: its query tiles in the
  // heavy-first order, each for every head of the section. The dynamic
  // schedule then takes the section's heaviest items first, the query heads
  // of a KV head run together, and the K/V the running items read is that
  // of the section's heads only, which L2 can hold (the runtime sizes the
  // sections to the keys and the batch's sequences: rt::sectionHeads).
  Value position;
  if (v.persistent) {
    Value perSection = mul(sectionHeads, numQTiles);
    Value section = divu(item, perSection);
    Value first = mul(section, sectionHeads);
    Value size =
        arith::MinUIOp::create(b, loc, sectionHeads, sub(numHeads, first));
    Value rest = sub(item, mul(section, perSection));
    position = divu(rest, size);
    head = add(first, remu(rest, size));
  } else {
    position = remu(item, numQTiles);
    head = divu(item, numQTiles);
  }
  kvHead = divu(head, kvGroup);
  Value qTile = at(order, position);
  Value seq = at(qTileSeq, qTile);
  Value local = sub(qTile, at(qTileBase, seq));
  qStart = at(cuQ, seq);
  qLen = sub(at(cuQ, add(seq, c32(1))), qStart);
  kStart = at(cuK, seq);
  kLen = sub(at(cuK, add(seq, c32(1))), kStart);
  qTileRow = add(qStart, mul(local, c32(v.tile.q)));
  entryBase = at(offsets, qTile);
  itemPartials = windowColumns ? at(gPartials, qTile) : c32(0);
  numEntries = sub(at(offsets, add(qTile, c32(1))), entryBase);
  // A packed item whose positions all lie past q_len (a sequence's last
  // query tile) has no rows to compute: it runs no step.
  Value past =
      cmp(arith::CmpIPredicate::sge, sub(packedItem().second, qStart), qLen);
  numEntries = select(past, c32(0), numEntries);
  // The grid kernel's first entry, loaded here so that the consumers' first
  // step does not wait for it after Q (0 for an empty list, whose slot may
  // lie past the buffer's end). The persistent consumers load it before
  // their Q wait (consumeItem): in the producer's decode it lengthened the
  // chain of loads before the hand-over, 2-5% slower on the H200.
  if (v.persistent)
    return;
  SmallVector<Value> first = ifElse(
      cmp(arith::CmpIPredicate::sgt, numEntries, c32(0)), TypeRange{i32, i32},
      [&] {
        return SmallVector<Value>{at(gEntries, entryBase),
                                  windowColumns ? loadI32(gWindows, entryBase)
                                                : c32(0)};
      },
      [&] { return SmallVector<Value>{c32(0), c32(0)}; });
  firstWord = first[0];
  firstWindow = first[1];
}

void ForwardBuilder::producer() {
  // The grid kernel's copies are issued by one thread, the producer
  // warpgroup's first (its whole warp waiting, lane 0 issuing, measured 2-7%
  // slower). The persistent kernel's first warp claims, decodes and hands
  // over each item and waits for the ring together, lane 0 issuing: its
  // values are then warp-uniform (warpUniform) and stay on the uniform
  // datapath (lane 0 alone measured 3-5% slower on short items).
  producerLane0 = eq(tid, c32(sm90::kConsumerThreads));
  Value lead = v.persistent ? eq(warpIdx, c32(sm90::kConsumerThreads / 32))
                            : producerLane0;
  ifThen(lead, [&] {
    int64_t dBoxes = v.headDim / sm90::kRowElements;
    int64_t kBoxes = v.tile.k / sm90::kBoxRows;
    // Ring position `t` in a ring of `stages`: its stage, the parity the
    // producer waits for (the consumers' opposite: a fresh barrier counts
    // as freed) and the stage's offset.
    auto producerSlot = [&](Value t, const Ring &ring) {
      auto [stage, consumerParity, stageBytes] = stageOf(t, ring);
      return std::make_tuple(toIndex(stage), producerParity(consumerParity),
                             add(pad, fromIndex(stageBytes, index)));
    };
    using Slot = decltype(producerSlot(Value(), kRing));
    // The first key row of entry `it`.
    auto keyRowOf = [&](Value it) {
      Value word = loadI32(gEntries, add(entryBase, it));
      if (v.persistent)
        word = warpUniform(word);
      return add(kStart, mul(entryField(word, ::cmask::abi::kEntryTile),
                             c32(v.tile.k)));
    };
    // The copies' issue: by the producing thread, or in the persistent
    // kernel's warp by its lane 0.
    auto issue = [&](auto body) {
      if (v.persistent)
        ifThen(producerLane0, body);
      else
        body();
    };
    // `groups` groups of 64 rows from `row` on (of head `h`), each as
    // D/64 boxes of 64 x 64 at `base + offset + group * groupBytes`, the
    // groups `groupRows` positions apart: Q's two warpgroup halves (packed,
    // each box is 64 >> qPackShift positions of 2^qPackShift heads), V's
    // TK/64 key groups.
    auto loadRowBoxes = [&](Value tm, Value barrier, Value barrierIdx,
                            Value base, int64_t offset, int64_t groups,
                            int64_t groupBytes, Value h, Value row,
                            Value groupRows) {
      Value hIdx = toIndex(h);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t d = 0; d < dBoxes; ++d) {
          Value dst = view(
              add(base, cIdx(offset + g * groupBytes + d * sm90::kBoxBytes)),
              boxShape(sm90::kBoxRows));
          nvgpu::TmaAsyncLoadOp::create(
              b, loc, dst, barrier, tm,
              ValueRange{cIdx(64 * d), hIdx,
                         toIndex(add(row, mul(groupRows, c32(g))))},
              barrierIdx, Value(), Value());
        }
    };
    auto loadK = [&](const Slot &slot, Value keyRow) {
      auto [stageIdx, parity, stageOff] = slot;
      waitParity(kRing.empty, stageIdx, parity);
      issue([&] {
        expectTx(kRing.full, stageIdx, lay.kvStage);
        Value kvh = toIndex(kvHead);
        for (int64_t d = 0; d < dBoxes; ++d) {
          Value dst = view(
              add(stageOff, cIdx(lay.kOff + d * v.tile.k * sm90::kRowBytes)),
              boxShape(v.tile.k));
          nvgpu::TmaAsyncLoadOp::create(
              b, loc, dst, kRing.full, tmK,
              ValueRange{cIdx(64 * d), kvh, toIndex(keyRow)}, stageIdx, Value(),
              Value());
        }
      });
    };
    auto loadV = [&](const Slot &slot, Value keyRow) {
      auto [stageIdx, parity, stageOff] = slot;
      waitParity(vRing.empty, stageIdx, parity);
      issue([&] {
        expectTx(vRing.full, stageIdx, lay.kvStage);
        loadRowBoxes(tmV, vRing.full, stageIdx, stageOff, lay.vOff, kBoxes,
                     lay.vBox, kvHead, keyRow, c32(sm90::kBoxRows));
      });
    };
    auto loadQ = [&](Value qUse) {
      // Into the buffer the consumers released after the last S of the
      // item that used it before (lay.qSlots items ago).
      Value slot = remu(qUse, c32(lay.qSlots));
      Value slotIdx = toIndex(slot);
      if (v.persistent)
        waitParity(emptyQ, slotIdx, producerParity(parityOf(qUse, lay.qSlots)));
      Value slotOff = mul(slotIdx, cIdx(lay.qBytes));
      issue([&] {
        expectTx(barQ, slotIdx, lay.qBytes);
        auto [firstHead, firstRow] = packedItem();
        loadRowBoxes(tmQ, barQ, slotIdx, add(pad, slotOff), 0, 2, lay.qWG,
                     firstHead, firstRow, shr(c32(sm90::kBoxRows), qPackShift));
      });
    };
    // Q, then K and V of each entry of the current item (ring positions
    // from tBase on); `qUse`: the Q loads before it.
    auto produceItem = [&](Value qUse) {
      loadQ(qUse);
      forEach(c64(0), sext64(numEntries), [&](Value it64) {
        Value it = trunc32(it64);
        Value t = add(tBase, it), keyRow = keyRowOf(it);
        loadK(producerSlot(t, kRing), keyRow);
        loadV(producerSlot(t, vRing), keyRow);
      });
    };
    if (!v.persistent) {
      // The CTA's own item (build() decoded it). Nothing for a query tile
      // without entries: its CTA must not exit with a copy in flight.
      tBase = c32(0);
      ifThen(cmp(arith::CmpIPredicate::sgt, numEntries, c32(0)),
             [&] { produceItem(c32(0)); });
      return;
    }
    // Carried: the item, the items handed over, the ring positions and the
    // Q loads so far. The first item is the CTA's index, the next ones come
    // from the launch's counter. The item count is reloaded per item (an L1
    // hit): kept live, it spilled in the producer's 24 registers.
    SmallVector<Type> types(4, i32);
    SmallVector<Value> fin = whileLoop(
        ValueRange{bidX, c32(0), c32(0), c32(0)}, types,
        [&](SmallVector<Value> c) {
          SmallVector<Value> r = {
              cmp(arith::CmpIPredicate::slt, c[0],
                  mul(warpUniform(loadI32(gCounts, c32(0))), numHeads))};
          r.append(c);
          return r;
        },
        [&](SmallVector<Value> c) {
          Value j = c[1], qUse = c[3];
          tBase = c[2];
          // Claimed now, used at the end.
          Value next = add(gridX, claimItem(gSched, producerLane0));
          decodeItem(c[0]);
          publishItem(items, j,
                      {head, qTileRow, qStart, qLen, kStart, kLen, entryBase,
                       numEntries},
                      producerLane0);
          Value has = cmp(arith::CmpIPredicate::sgt, numEntries, c32(0));
          ifThen(has, [&] { produceItem(qUse); });
          return SmallVector<Value>{
              next, add(j, c32(1)), add(tBase, numEntries),
              add(qUse, arith::ExtUIOp::create(b, loc, i32, has))};
        });
    // No more items: a negative entry count tells the consumers.
    SmallVector<Value> stop(kItemFields, c32(0));
    stop[kItemNumEntries] = c32(-1);
    publishItem(items, fin[1], stop, producerLane0);
    releaseCounters(gSched, gridX, producerLane0);
  });
}
