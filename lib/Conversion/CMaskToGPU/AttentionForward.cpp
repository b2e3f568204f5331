//===- AttentionForward.cpp - Descriptor-driven attention forward ---------===//
//
// One parameterized builder (Attention.h) for the sm_90a forward kernel:
// element type, head dimension D (64 or 128), key tile TK (64 or 128) and
// slot count K are the parameters; everything below is derived from them.
//
// Shared memory (bytes from a 1024-aligned base, 128B-swizzled boxes of 64
// columns, docs/attention.md):
//   Q      [slot][wg 2][D/64] boxes of 64 x 64        slots * 2 * 64 * D * 2
//          (slots: 1; the persistent kernel's 2)
//   K ring [stage][D/64] boxes of TK x 64             kStages * TK * D * 2
//   V ring [stage][TK/64][D/64] boxes of 64 x 64      vStages * TK * D * 2
// The mbarriers are static shared memory, which `gpu.dynamic_shared_memory`
// aliases: the dynamic buffer is used from its first 1024-aligned address
// past 1 KB (2 KB are reserved for that).
//
// A step of the consumers over key tile t: wait for K(t) and V(t-1); issue
// S(t) = QK^T (wgmma, asynchronous); issue O += P(t-1)V(t-1) (P from
// registers, the A operand); build the visibility words of partial tiles;
// wait for S(t); mask it (partial tiles only); online softmax; release
// K(t); wait for PV(t-1); pack P(t) into the registers PV(t-1) has freed;
// rescale O to step t's row maxima (FlashAttention-4's sm90 order). ptxas
// keeps the PV wait below the K release, whose predicate depends on the
// row maxima, so the exponentials run under the warpgroup's own PV; with
// the release right after the S wait, ptxas hoisted the PV wait above the
// softmax (docs/performance.md).
// Column windows (the grid kernel at 128x128, docs/attention.md): a
// warpgroup runs a partial tile whose descriptor window (tile_windows) fits
// 80 keys on those keys only (S as m64n80k16, P in 20 registers, the PV in
// 5 k-steps): four step bodies (this tile and the previous one each whole
// or windowed), each waiting for its own wgmmas. Only for query tiles with
// at least a quarter of their tiles partial (partial_counts): the dispatch
// slowed the steps of full tiles by 2-4%.
// The two consumer warpgroups issue their wgmmas independently: making them
// take turns (FlashAttention-3's ping-pong) measured 2-4% slower here
// (docs/performance.md).
//
// GQA packing (the q_pack_shift argument, docs/attention.md): a work item's
// 128 rows are then the 2^shift query heads of one KV head at 128 >> shift
// positions of its query tile (packedItem, rowPos/rowHead); the steps are
// the same, each row's output bitwise the unpacked one's.
//
// Two schedules (AttentionVariant::persistent). The grid: one CTA per work
// item (head, query tile; packed: KV head and part of a query tile), decoded
// from the CTA's index before the roles split. Persistent: one CTA per SM; the
// producer warp claims items from a counter pair (the Scheduler argument; the
// last CTA resets it), decodes each and hands it to the consumers through two
// shared-memory slots (fullItem/emptyItem); the barrier phases run on across
// items (ring position tBase + entry), Q has two buffers (each released after
// the last S of its item) so that an item's Q loads a whole item ahead, at the
// cost of a K stage (the V ring keeps 3 at D=128); the items come in sections
// of heads whose K/V L2 can serve (the section_heads argument). Launched one
// CTA per item the persistent kernel measured 2-5% slower than the grid
// kernel (about half of it the item loop around the steps); one CTA per
// SM, it gained 12-20% on batches and single sequences of up to 8K keys
// and lost 1-4% at 16K-32K (docs/performance.md), so the runtime chooses
// per call (docs/attention.md).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "KernelSignature.h"
#include "WarpSpecialized.h"
#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

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
/// The kernel's arguments (cmask_runtime/KernelABI.h).
namespace abi = ::cmask::abi::forward;

std::string AttentionVariant::kernelName(llvm::StringRef prefix) const {
  return (prefix + "_fwd_" + stringifyElementType(dtype) + "_d" +
          llvm::Twine(headDim) + "_" + tile.str() +
          (persistent ? "_persistent" : ""))
      .str();
}

namespace {
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
} // namespace

int64_t AttentionVariant::kStages() const {
  return SharedLayout(*this).kStages;
}
int64_t AttentionVariant::vStages() const {
  return SharedLayout(*this).vStages;
}
int64_t AttentionVariant::sharedBytes() const {
  return SharedLayout(*this).total;
}

std::optional<std::string>
mlir::cmask::checkAttentionVariant(const AttentionVariant &v) {
  if (v.headDim != 64 && v.headDim != 128)
    return "head dimension " + std::to_string(v.headDim) +
           " (supported: 64, 128)";
  if (v.tile.q != 128 || (v.tile.k != 64 && v.tile.k != 128))
    return "tile shape " + v.tile.str() + " (supported: 128x64, 128x128)";
  if (v.numSlots < 1 || v.numSlots > kMaxDescriptorSlots)
    return "slot count " + std::to_string(v.numSlots);
  if (v.kStages() < 2)
    return "shared memory: fewer than two K/V stages fit";
  return std::nullopt;
}

namespace {

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

} // namespace

//===----------------------------------------------------------------------===//
// Producer: one thread streams Q, then K and V of each item's tile list;
// in the persistent kernel its warp claims and hands over the items.
//===----------------------------------------------------------------------===//

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
  // sections to the keys: rt::sectionHeads).
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

//===----------------------------------------------------------------------===//
// Consumers.
//===----------------------------------------------------------------------===//

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
    Value mNew = maxf(mOld[h], quadReduce(x, /*isMax=*/true));
    // A row that has seen nothing yet keeps m = -inf: exponents relative
    // to 0 then give exp2(-inf) = 0, not NaN.
    Value isEmpty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, negInf);
    offset[h] = select(isEmpty, zeroF,
                       arith::NegFOp::create(b, loc, mulf(mNew, scaleLog2)));
    out.m[h] = mNew;
    out.corr[h] = ex2(fma(mOld[h], scaleLog2, offset[h]));
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
  // In order (a tree measured no faster on the H200: ptxas hides the
  // chain's latency).
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
  // still zero). ptxas spreads the multiplies among the exponentials.
  if (!first)
    acc = rescale(acc, sm.corr[0], sm.corr[1]);
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
    Value statsOn = cmp(arith::CmpIPredicate::ne,
                        LLVM::PtrToIntOp::create(b, loc, i64, gStats), c64(0));
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

//===----------------------------------------------------------------------===//
// The kernel.
//===----------------------------------------------------------------------===//

void ForwardBuilder::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto arg = [&](int i) { return entry.getArgument(i); };
  tmQ = tensorMapArg(arg(abi::TmQ), boxShape(sm90::kBoxRows), elt,
                     /*swizzle=*/true);
  tmK = tensorMapArg(arg(abi::TmK), boxShape(v.tile.k), elt, /*swizzle=*/true);
  tmV = tensorMapArg(arg(abi::TmV), boxShape(sm90::kBoxRows), elt,
                     /*swizzle=*/true);
  gO = global(arg(abi::Out));
  gLSE = global(arg(abi::Lse));
  cuQ = global(arg(abi::CuSeqlensQ));
  cuK = global(arg(abi::CuSeqlensK));
  gIv = global(arg(abi::Intervals));
  qTileSeq = global(arg(abi::QTileSeq));
  qTileBase = global(arg(abi::QTileBase));
  Value counts = global(arg(abi::Counts));
  offsets = global(arg(abi::TileOffsets));
  gEntries = global(arg(abi::TileEntries));
  gWindows = global(arg(abi::TileWindows));
  gPartials = global(arg(abi::PartialCounts));
  order = global(arg(abi::TileOrder));
  gStats = global(arg(abi::Stats));
  gSched = global(arg(abi::Scheduler));
  numHeads = arg(abi::NumHeads);
  kvGroup = arg(abi::KvGroup);
  qPackShift = arg(abi::QPackShift);
  packMask = sub(shl(c32(1), qPackShift), c32(1));
  sectionHeads = arg(abi::SectionHeads);
  oTokenStride = arg(abi::OTokenStride);
  oHeadStride = arg(abi::OHeadStride);
  totalQ = arg(abi::TotalQ);
  scaleLog2 = arg(abi::ScaleLog2);

  tid = fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i32);
  bidX = fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i32);
  gridX = fromIndex(gpu::GridDimOp::create(b, loc, gpu::Dimension::x), i32);
  // The work items: (head, query tile), heads outermost: the CTAs that run
  // together are mostly of one head and read the same K/V prefix, which L2
  // then serves once (on the H200 at 32K, DRAM traffic halves against heads
  // innermost; docs/performance.md). In a head, the query tiles come
  // heaviest first.
  numQTiles = warpUniform(loadI32(counts, c32(0)));
  gCounts = counts;
  warpIdx = shr(tid, c32(5));
  wg = shr(warpIdx, c32(sm90::kWarpgroupShift - 5));

  auto body = [&] {
    barQ = declareBarriers(lay.qSlots, 1);
    kRing = declareRing(lay.kStages);
    vRing = declareRing(lay.vStages);
    if (v.persistent) {
      emptyQ = declareBarriers(lay.qSlots, kConsumerWarps);
      items.ring = declareRing(kItemSlots);
      items.fields = kItemFields;
    }
    initBarriers(tid, {tmQ, tmK, tmV});
    items.addr = trunc32(fromIndex(
        add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem),
            add(pad, cIdx(lay.items))),
        i64));

    splitRoles(wg, [&] { producer(); }, [&] { consumer(); });
  };
  if (v.persistent) {
    // Each CTA takes items until none is left: the first its own index,
    // the next ones from the launch's counter (producer()).
    body();
  } else {
    // One CTA per item: the grid covers the batch's bound on query tiles
    // (abi::batchQTiles) x heads; the batch may have fewer query tiles.
    Value perHead = divu(gridX, numHeads);
    Value slot = remu(bidX, perHead); // position in the heavy-first order
    ifThen(cmp(arith::CmpIPredicate::slt, slot, numQTiles), [&] {
      decodeItem(add(mul(divu(bidX, perHead), numQTiles), slot));
      body();
    });
  }
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUFuncOp mlir::cmask::buildAttentionForward(
    gpu::GPUModuleOp gpuModule, llvm::StringRef name,
    const AttentionVariant &variant, Location loc) {
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto func = createKernel(b, loc, name, abi::kSignature,
                           AttentionVariant::kThreads, /*minBlocks=*/1);
  ForwardBuilder(b, loc, variant).build(func);
  return func;
}
