//===- BackwardWalk.h - The walk the backward's tile kernels share -*- C++
//-*-===//
//
// Internal to lib/Conversion/CMaskToGPU. The backward's warp-specialized
// kernels (AttentionBackward.cpp lists them) are one walk: a CTA holds a
// fixed tile of 128 rows (two 128-row operands, A and B) and its consumer
// warpgroups step through a list of 64-row tiles that the producer streams
// through a ring (two operands per stage); each step computes
//   S^T = A_w ringA^T, dP^T = B_w ringB^T      (wgmma m64n64, a group each)
//   P^T = 2^(S^T scale log2e + mlse), dS^T = P^T (dP^T - delta)
// masked in partial tiles (and tiles crossing a sequence's end), stores
// dS^T to shared memory if the kernel shares it between its warpgroups
// (P^T and dS^T stay in registers: the kernel uses them as wgmma A
// operands, withP and gradients), then the kernel's own gradient wgmmas.
//   key-tile kernel (BackwardKeyTile.cpp): A, B = K, V of a key tile; the
//     ring walks its query tiles (Q, dO, and mlse/delta rows); dV, dK in
//     registers, dQ added to a global accumulator;
//   its row-interval form (BackwardKeyTileRows.cpp): the same kernel where
//     the spec has no column direction: the list and the masks come from
//     the row direction;
//   query-tile kernel (BackwardQueryTile.cpp): A, B = Q, dO of a query
//     tile; the ring walks its key tiles (K, V); dQ in registers
//     (deterministic).
// BackwardWalk builds the walk; a kernel defines what differs through the
// hooks below (its arguments, list, masks, row values and gradients).
//
// Shared memory (bytes from a 1024-aligned base; 128B-swizzled boxes):
//   fixed  A, B: [D/64] boxes of 128 x 64              2 * 128 * D * 2
//   stages [stage] {ringA, ringB: [D/64] boxes 64 x 64} stages * 2 * 64 * D * 2
//   LD     [stage] {mlse, delta: 68 f32 at 0, 512}     stages * 1024
//          (TMA boxes of 68 from the query tile's first row rounded down
//          to a multiple of 4: a box's first element must be 16-byte
//          aligned, an unaligned one faults with an illegal instruction)
//   dS^T   [buffer 2][wg 2] 64 x 64                    32 KB
//   (row intervals only) the key tile's list of query tiles, its length,
//   and the step's visibility words [64 query rows][4 x 32 keys]
//                                                      32 KB + 16 + 1 KB
//   (column lists only) dQ staging [wg 2][warp 4] 16 query rows x 64
//          columns fp32, in the accumulator's order    32 KB
//          and each warp's target in the accumulator   8 x 8
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDWALK_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDWALK_H

#include "WarpSpecialized.h"

#include "llvm/Support/MathExtras.h"

#include <array>

namespace mlir::cmask {

/// The TMA box of mlse and delta rows: a query tile's 64 rows from its first
/// row rounded down to a multiple of 4 (the runtime's encodeRows encodes the
/// same box).
constexpr int64_t kLdBox = ::cmask::abi::tensor_map::kRowValues;

/// The query tiles one key tile's list holds in shared memory (row
/// intervals only): query sequences up to 64 times this many tokens.
constexpr int64_t kRowListCapacity = 8192;

/// The fixed tile: 128 rows (keys; queries in the query-tile kernel), in
/// boxes of 128 rows of 64 columns.
constexpr int64_t kFixedRows = ::cmask::abi::tensor_map::kFixedRows;
constexpr int64_t kFixedBoxBytes = kFixedRows * sm90::kRowBytes;
/// A ring stage's row values: mlse at 0, delta at kLdDeltaOffset (kLdBox
/// floats each).
constexpr int64_t kLdStageBytes = 1024;
constexpr int64_t kLdDeltaOffset = 512;
static_assert(kLdBox * 4 <= kLdDeltaOffset &&
              kLdDeltaOffset + kLdBox * 4 <= kLdStageBytes);

/// The key-tile kernel's dQ staging: 2 warpgroups x 4 warps x 4 KB, then
/// the global address each warp's 4 KB are added to (8 x i64; 0: none).
constexpr int64_t kDqWarpBytes = 16 * 64 * 4;
constexpr int64_t kDqStagingBytes = 8 * kDqWarpBytes;
constexpr int64_t kDqTargetsBytes = 8 * 8;
/// The producer warpgroup's warp that hands the dQ staging to the bulk-copy
/// engine (its first warp issues the copies), and the threads of the
/// barriers between it and the consumers.
constexpr int64_t kDqWriterWarp = sm90::kConsumerThreads / 32 + 1;
constexpr int64_t kDqSyncThreads = sm90::kConsumerThreads + 32;
static_assert(kDqWriterWarp != sm90::kConsumerThreads / 32 &&
                  kDqWriterWarp <
                      (sm90::kConsumerThreads + sm90::kWarpgroupThreads) / 32,
              "the dQ warp: the producer warpgroup's, not its first (the "
              "producer's copies loop there)");
/// The grid's order (BackwardWalk::forEachCta) interleaves its last heads
/// while their rows, dO and dQ accumulator (the walk's ringBytesPerHead)
/// fit in this much: the forward sections' L2 budget before batches got 16
/// MiB (rt::kBatchSectionBytes, measured on the forward alone), kept here
/// for batches too until the backward is measured at the power limit. Only
/// a launch's tail is interleaved, and at most as many heads as the work
/// asks (forEachCta): causal 8 x 4K interleaves one head with either
/// budget (the heaviest key tile's 64 steps x 132 SMs are a head's 8,448),
/// so 16 MiB would change the tails of 8 x 1K (4 -> 2 heads), 8 x 2K,
/// 16 x 1K and 4 x 8K (2 -> 1) only.
constexpr int64_t kInterleaveBytes = int64_t{64} << 20;

/// Byte offsets of the backward's shared memory (the file comment).
struct BackwardLayout {
  int64_t kv, qBox, stage, stages, qdOff, ldOff, dsOff, listOff, maskOff, dqOff,
      dqBytes, total;
  explicit BackwardLayout(const BackwardVariant &v) {
    kv = kFixedRows * v.headDim * 2;
    qBox = 64 * v.headDim * 2; // one ring operand per stage
    stage = 2 * qBox;
    stages = 2;
    qdOff = 2 * kv;
    ldOff = qdOff + stages * stage;
    dsOff = llvm::alignTo(ldOff + stages * kLdStageBytes, sm90::kAtomBytes);
    listOff = dsOff + 4 * sm90::kBoxBytes;
    // Row intervals: the key tile's list of query tiles, its length, and
    // the step's visibility words (64 query rows x 4 words of 32 keys).
    int64_t list = v.rowTileK ? 4 * kRowListCapacity + 16 : 0;
    maskOff = listOff + list;
    // The key-tile kernel's dQ staging: [wg 2][warp 4] 16 query rows x 64
    // columns, fp32, each warp's 4 KB in the blocked accumulator's order,
    // then the warps' 8 targets (none in the row-interval form, whose list
    // leaves no room: it adds dQ with atomics).
    dqOff = llvm::alignTo(maskOff + (v.rowTileK ? 64 * 4 * 4 : 0), 128);
    dqBytes = v.rowTileK ? 0 : kDqStagingBytes + kDqTargetsBytes;
    total = dqOff + dqBytes + sm90::kSharedReserve;
  }
};

/// The walk of a backward tile kernel (the file comment).
class BackwardWalk : public WarpSpecializedKernel {
public:
  BackwardWalk(OpBuilder &b, Location loc, const BackwardVariant &v)
      : WarpSpecializedKernel(b, loc, v.dtype), v(v), lay(v) {
    dBoxes = v.headDim / 64;
    acc64 = accumulatorType(32);
    accD = accumulatorType(v.headDim / 2);
  }
  virtual ~BackwardWalk() = default;

protected:
  // --- what a kernel defines -------------------------------------------------
  /// The CTAs' work: calls `run(seq, local, tile)` for the CTA's fixed tile
  /// (`local` of sequence `seq`; `tile` its index in the walked direction's
  /// tiles, if any) after setting fixHead. Default: the walked direction's
  /// tiles (gTileSeq, gTileBase, gCounts, gOrder) in `order`, heads
  /// outermost, the last ones interleaved (the definition's comment).
  virtual void forEachCta(Value ctaHeads,
                          function_ref<void(Value, Value, Value)> run);
  /// The fixed tile's list (before the barriers are made). Default: its
  /// entries in gEntries from gOffsets[tile].
  virtual void loadList(Value tile) {
    entryBase = loadI32(gOffsets, tile);
    numEntries = sub(loadI32(gOffsets, add(tile, c32(1))), entryBase);
  }
  /// Sets `steps` once shared memory is addressable (`seq`, `local`: the
  /// fixed tile's).
  virtual void setSteps(Value seq, Value local) = 0;
  /// Runs in the producer warpgroup with the launch's registers.
  virtual void beforeProducerRegisters() {}
  /// Runs in every thread of the producer warpgroup after the producer's
  /// loads (its first warp's), when the CTA has steps.
  virtual void producerWarps() {}
  /// Runs in the consumer warpgroups before their setmaxnreg.
  virtual void beforeConsumerRegisters() {}
  /// The head of the steps' tiles in round `round` of the list (step t is
  /// entry t % numEntries of round t / numEntries).
  virtual Value ringHead(Value round) = 0;
  /// Interval slots per fixed row (the fixed tile's direction).
  virtual int64_t fixedSlots() const = 0;
  /// Entry e of the list (e < numEntries). Default: from gEntries.
  virtual Value entryWord(Value e) {
    return loadI32(gEntries, add(entryBase, e));
  }
  /// The masking word of a step from its entry word: the two fragment
  /// rows' visibility words packed into one i32: bit 8 (j % 4) + e +
  /// 2 (2 half + j / 4) is element (j, e) of row half `half`. Default:
  /// from the interval table of the fixed tile's rows (gIv).
  virtual Value maskWord(Value word);
  /// Bytes a ring stage receives besides its two operands, and their
  /// copies (issued after the operands'; `stage` i32 and `stageIdx` index,
  /// `qRow`: the stage's first row, `head` index).
  virtual int64_t stageExtraBytes() const { return 0; }
  virtual void loadStageExtras(Value stage, Value stageIdx, Value qRow,
                               Value head) {}
  /// The consumers' set-up past the walk's own: the named barrier and
  /// thread count of the dS^T exchange through shared memory (dsSync,
  /// dsSyncThreads; left unset, dS^T stays in registers), and what else the
  /// kernel keeps in registers.
  virtual void consumerSetup() = 0;
  /// -LSE log2(e) and delta of the fragment's two query values for column
  /// group j (`col`: the thread's first column; `ldStage`: the stage's row
  /// values), and which of the two element i of the group uses.
  struct QueryValues {
    std::array<Value, 2> mlse, delta;
  };
  virtual QueryValues queryValues(Value ldStage, Value col) = 0;
  virtual int64_t queryOf(int64_t i) const = 0;
  struct StepOperands {
    Value kRegion, qDesc, doDesc, dsDesc, mnQ;
    Value head;
    TileEntry entry;
    bool first;
  };
  /// What the kernel does with P^T (masked, fp32 fragments) while dP^T
  /// runs, in the step's stage (`g`: its operands; dV the accumulator the
  /// walk carries). Returns the wgmma groups it issued (none by default).
  virtual int64_t withP(const StepOperands &g, ArrayRef<Value> p, Value &dV) {
    return 0;
  }
  /// What the kernel does with dS^T as soon as it is computed (before it is
  /// stored): `ds`, this warpgroup's dS^T as a wgmma's A fragments (16 i32
  /// of element pairs, k-step k in 4k..4k+3, as withP's P^T). `g`: the
  /// descriptors of the step's operands. Default: dK += dS^T ringA (the
  /// key-tile kernel's dK += dS^T Q; the query-tile kernel's dQ += dS K,
  /// carried as dK), its own commit group.
  virtual void withDs(const StepOperands &g, ArrayRef<Value> ds, Value &dK) {
    accumulateFromRegisters(dK, ds, g.mnQ, g.first);
  }
  /// The step's gradient wgmmas that read dS^T from shared memory, once
  /// both warpgroups stored it (kernels that share it, consumerSetup).
  /// Returns their accumulator in flight, which addGradients receives after
  /// the next step's masking word is made (its global loads under these
  /// wgmmas) and before the next step's S^T is issued.
  virtual Value gradients(const StepOperands &g) { return Value(); }
  virtual void addGradients(const StepOperands &g, Value acc) {}
  /// Writes the final accumulators.
  virtual void storeGradients(Value dV, Value dK) = 0;

  // --- the walk --------------------------------------------------------------
  /// Builds the CTA: the fixed tile from forEachCta, the barriers, the
  /// roles. `cuFixed`, `cuRing`: cu_seqlens of the fixed tile's and the
  /// steps' dimension; `ctaHeads`: heads over which CTAs are spread.
  void buildWalk(Value cuFixed, Value cuRing, Value ctaHeads);
  /// The descriptor arguments of the column-list kernels, from argument
  /// `first` on: (cu_seqlens_q, cu_seqlens_k, intervals, tile_seq,
  /// tile_base, counts, tile_offsets, tile_entries, tile_order). Sets gIv,
  /// gEntries and the walked direction's tiles; returns cu_seqlens_q and
  /// cu_seqlens_k.
  std::pair<Value, Value> walkArgs(Block &body, int first);
  void producer();
  void consumer();
  /// acc += A B as one commit group of sm90::kStepsPerRow wgmmas m64nDk16:
  /// A from registers (`a`: 16 i32 of element pairs, k-step k in
  /// 4k..4k+3), B the 64 ring rows x D at MN-major descriptor `mnB`. The
  /// first step's first k-step sets acc (scale-d 0, undef in).
  void accumulateFromRegisters(Value &acc, ArrayRef<Value> a, Value mnB,
                               bool first) {
    for (int64_t k = 0; k < sm90::kStepsPerRow; ++k)
      acc = wgmmaRegisterA(acc, a.slice(4 * k, 4),
                           add(mnB, descriptorOffset(k * sm90::kStepBytesMN)),
                           v.headDim, /*accumulate=*/!first || k != 0);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  }
  /// Writes `acc` (this warpgroup's 64 fixed rows x D, fp32 fragments) times
  /// `mult` (or as is) to the element-type rows of `out` at the fixed tile's
  /// tokens and head `fixHead`, rows inside the sequence only.
  void storeFixedRows(Value acc, Value out, Value tokenStride, Value headStride,
                      Value mult);
  /// Where a step is in the list: entry `e` of round `round` (the walk
  /// counts them instead of dividing t, whose division was the first link
  /// of the step's chain).
  struct ListPlace {
    Value e, round;
  };
  ListPlace nextPlace(ListPlace at) {
    Value e = add(at.e, c32(1));
    Value wrap = eq(e, numEntries);
    return {select(wrap, c32(0), e),
            add(at.round, arith::ExtUIOp::create(b, loc, i32, wrap))};
  }
  /// (stage index, consumer parity) of step t.
  std::pair<Value, Value> stageOf(Value t) {
    RingSlot slot = slotOf(ring, t);
    return {slot.stage, slot.parity};
  }
  /// Descriptor bases of a step (from one HopperEmitter::opaque copy of the
  /// address bits): the fixed A region, this warpgroup's rows of A and B,
  /// and the ring stages and dS^T buffers.
  struct Bases {
    Value kRegion, kBase, vBase, qdBase, dsBase;
  };
  Bases bases();
  /// Issues S^T = A_w ringA^T (or, `dP`, dP^T = B_w ringB^T) of step t as
  /// one commit group, first waiting for its stage when `wait` is given and
  /// holds; without the wait (S^T of the step past the last) the stale
  /// stage is read and the result is dropped. Returns it in flight.
  Value issueScores(const Bases &d, Value t, Value wait, bool dP = false);
  /// The decoded entry of a step: masked also when the fixed tile crosses
  /// its sequence's end (its rows past it must not reach the gradients).
  TileEntry stepEntry(Value word);
  /// One step, software-pipelined. On entry S^T of step t is in flight,
  /// with its entry word and masking word (computed a step ahead, while
  /// fewer accumulators are live); the step issues dP^T and computes P^T
  /// while it runs. `carried`: dV, dK, word, S^T, the masking word, then
  /// the step's ListPlace (e, round); returns the same for step t + 1 (dV,
  /// dK and S^T in flight; past the last step: entry 0, round past the
  /// last). `first`: dV and dK start here.
  SmallVector<Value> step(Value t, ValueRange carried, bool first);
  /// The thread's two fragment rows of the fixed tile: their index in the
  /// sequence, clamped to its last row (`clamped`), the i64 index of their
  /// interval slots and whether they are inside the sequence (past it: the
  /// last row's slots; their gradients are dropped and they are masked).
  void fixedRows(Value ivRow[2], Value fixValid[2],
                 Value clamped[2] = nullptr) {
    int64_t slots = fixedSlots();
    for (int h = 0; h < 2; ++h) {
      Value row = add(sub(fixRow, fixStart),
                      add(mul(wg, c32(64)), add(r0, c32(8 * h))));
      fixValid[h] = cmp(arith::CmpIPredicate::slt, row, fixLen);
      Value last = mins(row, sub(fixLen, c32(1)));
      if (clamped)
        clamped[h] = last;
      ivRow[h] = mul(sext64(add(fixStart, last)), c64(slots));
    }
  }
  Value view(Value byteOffset, ArrayRef<int64_t> shape, Type element) {
    return sharedView(smem, byteOffset, shape, element);
  }
  /// The shared address (i64) of the layout's offset 0.
  Value sharedBase() {
    return fromIndex(
        add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem), pad),
        i64);
  }

  const BackwardVariant &v;
  BackwardLayout lay;
  Type acc64, accD;
  int64_t dBoxes;

  // Kernel-wide values.
  /// The fixed tile's operands A, B and the ring's, their tensor maps; the
  /// row values' (key-tile kernels).
  Value tmRingA, tmFixA, tmFixB, tmRingB, tmMlse, tmDelta;
  Value gIv, gEntries;
  /// cu_seqlens of the fixed tile's dimension.
  Value gCuFixed;
  /// The walked direction's tiles (column-list kernels).
  Value gTileSeq, gTileBase, gCounts, gOffsets, gOrder;
  /// What the steps of one head's CTAs read and add to, in bytes (i64;
  /// unset: no bound on the interleaved heads), set before buildWalk.
  Value ringBytesPerHead;
  Value numHeads, kvGroup, scaleLog2;
  // The CTA's fixed tile: its head, sequence start and length, and first
  // row; the steps' dimension and tile list.
  Value tid, bid, wg, fixHead, fixStart, fixLen, fixRow, ringStart, ringLen;
  Value entryBase, numEntries, steps;
  /// base(seq) of the blocked dQ accumulator's padded rows
  /// (AttentionBackward.cpp).
  Value qBase16;
  Value barFixed;
  Ring ring;
  // Consumer values.
  /// The shared base's descriptor address bits (addr >> 4).
  Value isLane0, lane2q, r0, addrBits, ldBase, dsStore, dsChunk;
  /// The shared base's address (i32).
  Value smemBase;
  /// The dS^T exchange's named barrier and threads (consumerSetup; none:
  /// dS^T is not stored).
  Value dsSync;
  int64_t dsSyncThreads = 0;
};

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDWALK_H
