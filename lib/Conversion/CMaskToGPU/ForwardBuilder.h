//===- ForwardBuilder.h - The attention forward's builder -------*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: the sm_90a forward kernel's builder,
// one class over the warp-specialized Hopper base (WarpSpecialized.h), in
// three files: AttentionForward.cpp (the kernel's overview, its variants, the
// arguments and the roles), ForwardProducer.cpp (the work items and the
// copies) and ForwardConsumer.cpp (the steps, the softmax, the epilogue).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_FORWARDBUILDER_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_FORWARDBUILDER_H

#include "WarpSpecialized.h"
#include "cmask/Conversion/CMaskToGPU/Attention.h"

namespace mlir::cmask::forward {

/// A work item as the producer hands it to the consumers (shared memory,
/// two slots): the head, the query tile's first packed row, its sequence's
/// query and key ranges and its tile list.
enum ItemField {
  kItemHead,
  kItemQTileRow,
  kItemQStart,
  kItemQLen,
  kItemKStart,
  kItemKLen,
  kItemEntryBase,
  kItemNumEntries,
  kItemFields
};
constexpr int64_t kItemSlots = 2;
constexpr int64_t kItemBytes = kItemSlots * kItemFields * 4;
/// Byte offsets of the shared-memory regions of a variant.
struct SharedLayout {
  int64_t qWG, qBytes, qSlots, kvStage, vBox, kOff, vOff, items, total;
  int64_t kStages, vStages;
  explicit SharedLayout(const AttentionVariant &v) {
    vBox = sm90::kBoxRows * v.headDim * 2; // 64 keys of V
    qWG = 64 * v.headDim * 2;
    qBytes = 2 * qWG;
    // The persistent kernel double-buffers Q: the next item's Q loads
    // while the current item runs (with one buffer it waited for the
    // current item's last S and arrived after its epilogue).
    qSlots = v.persistent ? 2 : 1;
    kvStage = v.tile.k * v.headDim * 2;
    int64_t itemBytes = v.persistent ? kItemBytes : 0;
    int64_t room = AttentionVariant::kMaxSharedBytes - sm90::kSharedReserve -
                   sm90::kStaticBarrierBytes - qSlots * qBytes - itemBytes;
    // As many K/V stage pairs as fit (at most 4), then one more V stage
    // where it fits: the persistent kernel at D=128, 128x128 (2 K, 3 V
    // stages; on the H200 1.05-1.10x on batches of 1K-2K over 2 and 2,
    // within the runs' spread elsewhere: docs/performance.md).
    kStages = vStages = std::min<int64_t>(4, room / (2 * kvStage));
    if (kStages < 4 && room >= (2 * kStages + 1) * kvStage)
      ++vStages;
    kOff = qSlots * qBytes;
    vOff = kOff + kStages * kvStage;
    items = vOff + vStages * kvStage;
    total = items + itemBytes + sm90::kSharedReserve;
  }
};

/// The kernel under construction: types, constants and the values every
/// part of it uses.
class ForwardBuilder : public WarpSpecializedKernel {
public:
  ForwardBuilder(OpBuilder &b, Location loc, const AttentionVariant &v)
      : WarpSpecializedKernel(b, loc, v.dtype), v(v), lay(v) {
    nS = v.tile.k / 2;
    nO = v.headDim / 2;
    accO = accumulatorType(nO);
    // The grid kernel only: in the persistent one the windows' uniform
    // values pushed the producer's 24 registers into 68 bytes of spills.
    windowColumns =
        v.tile.k == ::cmask::abi::kMaxWindowColumns && !v.persistent ? 80 : 0;
  }

  void build(gpu::GPUFuncOp func);

private:
  /// A view of the dynamic shared memory at `byteOffset` (index).
  Value view(Value byteOffset, ArrayRef<int64_t> shape) {
    return sharedView(smem, byteOffset, shape, elt);
  }

  // --- pieces of the kernel --------------------------------------------------
  void producer();
  void consumer();
  /// The work item `item` (head-major, the query tiles of a head in the
  /// descriptor's heavy-first order): sets head, kvHead and the query
  /// tile's values (global loads).
  void decodeItem(Value item);
  /// (stage, parity for a consumer wait, byte offset of the stage) of the
  /// ring position `t` (steps of earlier items included) in the K or V
  /// ring.
  std::tuple<Value, Value, Value> stageOf(Value t, const Ring &ring);
  /// The keys of a tile a step covers: all TK, or, in a column window
  /// (docs/attention.md, Column windows), the warpgroup's windowColumns
  /// from key c0 (a multiple of 16; i32, warp-uniform).
  struct Keys {
    bool window = false;
    Value c0;
  };
  int64_t width(const Keys &keys) const {
    return keys.window ? windowColumns : v.tile.k;
  }
  /// Whether this warpgroup runs the entry's tile in its column window, and
  /// the window's first key: the descriptor's window of the warpgroup's
  /// rows (`windowWord`), from its first column rounded down to 16, when
  /// the tile is partial and the window holds it.
  std::pair<Value, Value> windowOf(const TileEntry &entry, Value windowWord);
  /// S = Q K^T over the step's keys.
  Value issueS(Value dK, const Keys &keys);
  /// O += P V over the keys of the step that made P (the packed registers
  /// `p`, width/4 of them used).
  Value issuePV(Value acc, ValueRange p, Value dV, const Keys &keys);

  using Entry = TileEntry;
  Entry decode(Value word) { return decodeEntry(word, v.tile.k, kLen); }
  SmallVector<Value> prefetchSlots(const Entry &entry) {
    return firstSlots(entry, gIv, ivRow, kLen);
  }
  /// The item's first query head and first packed row (position): the
  /// head and query tile's row unpacked; packed, the item's head names the
  /// KV head's heads (its multiple of the pack) and, by its rest, which
  /// part of the query tile's positions the item takes.
  std::pair<Value, Value> packedItem() {
    Value part = bitAnd(head, packMask);
    Value positions = shr(c32(v.tile.q), qPackShift);
    return {sub(head, part), add(qTileRow, mul(part, positions))};
  }
  /// The visibility words of the step's keys (relative to its first key).
  SmallVector<Value> maskWords(Entry entry, ValueRange first,
                               const Keys &keys) {
    if (keys.window)
      entry.tileStart = add(entry.tileStart, keys.c0);
    return visibilityWords(entry, first, gIv, ivRow, (width(keys) + 31) / 32,
                           lane4q);
  }
  SmallVector<Value> maskApply(const Entry &entry, ValueRange words,
                               SmallVector<Value> s);
  /// Online softmax of S (masked): m, l, corr and the unnormalized P.
  struct Softmax {
    Value m[2], l[2], corr[2];
    SmallVector<Value> p;
  };
  Softmax softmax(ValueRange s, Value m0, Value m1, Value l0, Value l1);
  /// The max or the sum of this thread's elements of row half `h` of `x`.
  Value rowReduce(ArrayRef<Value> x, int h, bool isMax);
  /// P in the registers of the PV wgmma's A operand (two elements each).
  SmallVector<Value> packP(ArrayRef<Value> p);
  Value rescale(Value acc, Value corr0, Value corr1);
  void epilogue(Value acc, Value m0, Value m1, Value l0, Value l1);
  /// The steps of the current item (none without entries): the carried
  /// values after its last PV. `qUse`: the Q loads before it.
  SmallVector<Value> consumeItem(Value qUse);
  /// One consumer step over the entry at position t (t > 0: with PV(t-1)).
  /// The positions of what a step carries to the next: O (rescaled to the
  /// step's row maxima, without its PV), the row maxima and sums, the tile
  /// counts (partial, full, full with bounds check), the entry and window
  /// words of the next step, the first key of this step's column window
  /// (-1: the whole tile), then P(t) (nS / 2 registers; a window's uses
  /// the first windowColumns / 4).
  enum Carried {
    kO,
    kM0,
    kM1,
    kL0,
    kL1,
    kPartial,
    kFull,
    kBounded,
    kWord,
    kWindow,
    kPrevC0,
    kP
  };
  /// The step in the shape its tile and the previous one ask for (column
  /// window or whole tile, per warpgroup): one of four step bodies, each
  /// issuing and waiting for its wgmmas (none is in flight across them).
  SmallVector<Value> step(Value t, bool first, ValueRange carried);
  /// `windows`: the step loads the next entry's window word (step()'s).
  SmallVector<Value> consumerStep(Value t, bool first, ValueRange carried,
                                  const Keys &cur, const Keys &prev,
                                  bool windows = false);
  /// The item's last PV: of the keys of its last step.
  Value lastPV(Value acc, ValueRange carried, Value dV, bool windows);

  const AttentionVariant &v;
  SharedLayout lay;
  int64_t nS, nO;
  Type accO;
  /// Keys of a column window (TK 128; 0: no windows). The width that holds
  /// CLEAR's radius-16 bands (64 rows + 16 on each side); a window starts
  /// at a multiple of 16 keys (the PV's k-steps).
  int64_t windowColumns;

  // Kernel-wide values.
  Value tmQ, tmK, tmV, gO, gLSE, gIv, gEntries, gWindows, gPartials, gStats,
      gSched;
  Value cuQ, cuK, qTileSeq, qTileBase, offsets, order, numQTiles, gCounts;
  Value bidX, gridX, tBase;
  Value numHeads, kvGroup, sectionHeads, oTokenStride, oHeadStride, totalQ,
      scaleLog2;
  /// GQA packing (abi q_pack_shift): a tile's rows are 2^qPackShift query
  /// heads of one KV head times tile.q >> qPackShift positions, row r
  /// position r >> qPackShift and head r & packMask (docs/attention.md).
  Value qPackShift, packMask;
  Value tid, wg, head, kvHead, qStart, qLen, kStart, kLen, qTileRow, entryBase,
      numEntries, firstWord, firstWindow, itemPartials;
  /// Q's buffers (full; emptyQ: the persistent kernel's release), the K and
  /// V rings, the persistent kernel's item slots.
  Value barQ, emptyQ;
  Ring kRing, vRing;
  /// The persistent kernel's items (fields as ItemField lists them).
  ItemRing items;
  Value warpIdx, producerLane0;
  // Consumer values.
  Value isLane0, lane4q, tileRow, ivRow[2], descQ, descQItem, descK, descV;
  /// The packed row (position) and head of the thread's fragment rows.
  Value rowPos[2], rowHead[2];
  /// The half of the query tile (64 positions) whose column window holds
  /// the warpgroup's rows: the warpgroup's own unpacked; packed, the half
  /// its 64 >> qPackShift positions lie in (a window bounds the visible
  /// columns of all of a half's rows, so of any of them).
  Value windowHalf;
  Value wgU; ///< the consumer warpgroup (uniform)
  Value negInf, zeroF;
};

} // namespace mlir::cmask::forward

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_FORWARDBUILDER_H
