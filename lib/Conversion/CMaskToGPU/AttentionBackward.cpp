//===- AttentionBackward.cpp - Descriptor-driven attention backward -------===//
//
// The sm_90a backward (Attention.h: buildAttentionBackward), from the same
// building blocks as the forward (HopperEmitter.h). Four kernels:
//
//   <name>_pre  D / 8 threads per (query row, head): delta = rowsum(dO * O),
//               mlse = -LSE * log2(e) (both fp32 [heads, ld_stride]).
//   <name>      one CTA per (key tile of 128 keys, key/value head), heads
//               outermost: walks the column direction's list of non-empty
//               query tiles (64 queries) for every query head of its group:
//                 S^T = K Q^T, dP^T = V dO^T          (wgmma m64n64)
//                 P^T = 2^(S^T scale log2e + mlse), dS^T = P^T (dP^T - delta)
//                 (partial tiles, or tiles crossing q_len / k_len: masked
//                 with the column intervals, as the forward masks rows)
//                 dV += P^T dO, dK += dS^T Q           (wgmma m64nD)
//                 dQ += dS K                           (wgmma m64n64,
//                                                       red.add.v4.f32)
//               then writes dK * scale and dV. Deterministic for dK and dV;
//               dQ's fp32 sums depend on the order of the atomics. The step
//               is software-pipelined (docs/attention.md#backward): S^T and
//               dP^T of the next tile are issued before the loop turns, dQ
//               is its own wgmma group whose atomics run under dV/dK.
//               Without a column direction (rowTileK, column mode rows):
//               one CTA per (key/value head, sequence, key tile); the
//               producer's first warp lists the query tiles from the row
//               direction's 128 x rowTileK tile entries in shared memory
//               (buildRowList), and partial tiles are masked with the row
//               intervals, transposed through shared memory (rowMaskWord).
//   <name>_dq   dQ = scale * dQacc in the element type, one float4 of the
//               accumulator per thread.
//   <name>_dqr  deterministic dQ (`deterministic=True`): the main kernel's
//               walk turned around. One CTA per (query tile of 128, query
//               head) walks the row direction's 128x64 tile list: the fixed
//               tile holds Q and dO (where the main kernel keeps K and V),
//               each step's ring stage K and V of 64 keys (where it keeps Q
//               and dO); S = Q K^T, dP = dO V^T with the same wgmmas,
//               P = 2^(S scale log2e + mlse_row), dS = P (dP - delta_row)
//               (row values in registers), masked with the row intervals,
//               and dQ += dS K with the main kernel's dK wgmmas; dQ * scale
//               is written once, in a fixed order (bitwise the same run to
//               run). Each warpgroup reads only its own dS: a barrier per
//               warpgroup, no dV, dK nor atomics.
//
// The dQ accumulator (fp32, zeroed by the runtime) is blocked so that each
// thread's four fragment values of a column pair are 16 contiguous bytes:
// query rows are padded per sequence, row r of sequence s at
//   R = base(s) + r,  base(s) = 16 ceil(cu_q[s] / 16) + 16 s
// (a multiple of 16 past the previous sequence), and (R, head, column c)
// lives at float index
//   ((R / 16) heads + head) 16 D + (c / 2) 32 + (R % 8) 4 + ((R / 8) % 2) 2
//   + c % 2.
// A query tile's rows past q_len (their dS is 0) may add zeros past the
// sequence's rows; the runtime leaves 64 rows of slack at the end.
//
// Shared memory (bytes from a 1024-aligned base; 128B-swizzled boxes; the
// rows kernel's Q, dO in K, V's place and K, V in Q, dO's, no LD nor P^T):
//   K, V   [D/64] boxes of 128 x 64                 2 * 128 * D * 2
//   stages [stage] {Q, dO: [D/64] boxes 64 x 64}    stages * 2 * 64 * D * 2
//   LD     [stage] {mlse, delta: 68 f32 at 0, 512}   stages * 1024
//          (TMA boxes of 68 from the query tile's first row rounded down
//          to a multiple of 4: a box's first element must be 16-byte
//          aligned, an unaligned one faults with an illegal instruction)
//   P^T    [wg 2] 64 x 64                           16 KB
//   dS^T   [buffer 2][wg 2] 64 x 64                 32 KB
//   (row intervals only) the key tile's list of query tiles, its length,
//   and the step's visibility words [64 query rows][4 x 32 keys]
//                                                   32 KB + 16 + 1 KB
//
// Validated against float64 autograd on the H200 (test/gpu/test_backward.py).
// ptxas: no spills (D = 64 and 128).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "HopperEmitter.h"
#include "KernelSignature.h"

#include "llvm/Support/MathExtras.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::cmask;
// The kernels' arguments (cmask_runtime/KernelABI.h). Both main kernels
// begin with the same arguments (the ABI's backward head), up to
// `intervals`.
namespace bwd = ::cmask::abi::backward;
namespace bwd_rows = ::cmask::abi::backward_rows;
namespace bwd_pre = ::cmask::abi::backward_pre;
namespace bwd_dq = ::cmask::abi::backward_dq;
namespace bwd_dqr = ::cmask::abi::backward_dq_rows;
namespace abi = ::cmask::abi;

std::string BackwardVariant::kernelName(llvm::StringRef prefix) const {
  return (prefix + "_bwd_" + stringifyElementType(dtype) + "_d" +
          llvm::Twine(headDim))
      .str();
}

namespace {
/// The TMA box of mlse and delta rows: a query tile's 64 rows from its first
/// row rounded down to a multiple of 4 (the runtime's encodeRows encodes the
/// same box).
constexpr int64_t kLdBox = ::cmask::abi::tensor_map::kRowValues;

/// The query tiles one key tile's list holds in shared memory (row
/// intervals only): query sequences up to 64 times this many tokens.
constexpr int64_t kRowListCapacity = 8192;

/// The fixed tile: 128 rows (keys; queries in the rows kernel), in boxes of
/// 128 rows of 64 columns.
constexpr int64_t kFixedRows = ::cmask::abi::tensor_map::kFixedRows;
constexpr int64_t kFixedBoxBytes = kFixedRows * sm90::kRowBytes;
/// A ring stage's row values: mlse at 0, delta at kLdDeltaOffset (kLdBox
/// floats each).
constexpr int64_t kLdStageBytes = 1024;
constexpr int64_t kLdDeltaOffset = 512;
static_assert(kLdBox * 4 <= kLdDeltaOffset &&
              kLdDeltaOffset + kLdBox * 4 <= kLdStageBytes);

/// Byte offsets of the backward's shared memory.
struct BackwardLayout {
  int64_t kv, qBox, stage, stages, qdOff, ldOff, pOff, dsOff, listOff, maskOff,
      total;
  explicit BackwardLayout(const BackwardVariant &v) {
    kv = kFixedRows * v.headDim * 2;
    qBox = 64 * v.headDim * 2; // one of Q or dO per stage
    stage = 2 * qBox;
    stages = 2;
    qdOff = 2 * kv;
    ldOff = qdOff + stages * stage;
    pOff = llvm::alignTo(ldOff + stages * kLdStageBytes, sm90::kAtomBytes);
    dsOff = pOff + 2 * sm90::kBoxBytes;
    listOff = dsOff + 4 * sm90::kBoxBytes;
    // Row intervals: the key tile's list of query tiles, its length, and
    // the step's visibility words (64 query rows x 4 words of 32 keys).
    int64_t list = v.rowTileK ? 4 * kRowListCapacity + 16 : 0;
    maskOff = listOff + list;
    total = maskOff + (v.rowTileK ? 64 * 4 * 4 : 0) + sm90::kSharedReserve;
  }
};
} // namespace

int64_t BackwardVariant::sharedBytes() const {
  return BackwardLayout(*this).total;
}

int64_t BackwardVariant::rowListCapacity() const {
  return rowTileK ? kRowListCapacity : 0;
}

std::optional<std::string>
mlir::cmask::checkBackwardVariant(const BackwardVariant &v) {
  if (v.headDim != 64 && v.headDim != 128)
    return "head dimension " + std::to_string(v.headDim) +
           " (supported: 64, 128)";
  if (v.numSlots < 1 || v.numSlots > kMaxDescriptorSlots)
    return "column slot count " + std::to_string(v.numSlots);
  if (v.rowTileK != 0 && v.rowTileK != 64 && v.rowTileK != 128)
    return "row tile shape 128x" + std::to_string(v.rowTileK) +
           " (supported: 128x64, 128x128)";
  if (v.sharedBytes() > AttentionVariant::kMaxSharedBytes)
    return "shared memory";
  return std::nullopt;
}

namespace {

class BackwardBuilder : public HopperEmitter {
public:
  BackwardBuilder(OpBuilder &b, Location loc, const BackwardVariant &v)
      : HopperEmitter(b, loc, v.dtype), v(v), lay(v) {
    dBoxes = v.headDim / 64;
    acc64 = accumulatorType(32);
    accD = accumulatorType(v.headDim / 2);
  }

  void buildPre(gpu::GPUFuncOp func);
  void buildMain(gpu::GPUFuncOp func);
  void buildRows(gpu::GPUFuncOp func);
  void buildConvert(gpu::GPUFuncOp func);

private:
  Value view(Value byteOffset, ArrayRef<int64_t> shape, Type element) {
    return sharedView(smem, byteOffset, shape, element);
  }
  /// The global thread index of a 1-D launch.
  Value globalThread() {
    Value bid =
        fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i64);
    Value dim =
        fromIndex(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x), i64);
    Value tid =
        fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i64);
    return add(mul(bid, dim), tid);
  }

  /// What the main and the rows kernels share past their arguments: the
  /// CTA's tile and head from `order` (heaviest quarter of every head first),
  /// the barriers, then the producer and consumer warpgroups. `tiles`: the
  /// walked direction's (tile_seq, tile_base, counts, offsets, order);
  /// `cuFixed`, `cuRing`: cu_seqlens of the fixed tile's and the steps'
  /// dimension; `ctaHeads`: heads over which CTAs are spread.
  void buildCommon(ArrayRef<Value> tiles, Value cuFixed, Value cuRing,
                   Value ctaHeads);
  /// The descriptor arguments of both kernels, from argument `first` on:
  /// (cu_seqlens_q, cu_seqlens_k, intervals, tile_seq, tile_base, counts,
  /// tile_offsets, tile_entries, tile_order). Sets gIv and gEntries; returns
  /// cu_seqlens_q, cu_seqlens_k and the `tiles` of buildCommon.
  std::tuple<Value, Value, SmallVector<Value>> walkArgs(Block &body, int first);
  void producer();
  void consumer();
  /// The head of the steps' tiles: the query head of step t (columns: the
  /// group's heads outermost, the tile list inside), or the key/value head
  /// of the CTA's query head (rows).
  Value ringHead(Value t) {
    if (rows)
      return divu(fixHead, kvGroup);
    return add(mul(fixHead, kvGroup), divu(t, numEntries));
  }
  /// Writes `acc` (this warpgroup's 64 fixed rows x D, fp32 fragments) times
  /// `mult` (or as is) to the element-type rows of `out` at the fixed tile's
  /// tokens and head `fixHead`, rows inside the sequence only.
  void storeFixedRows(Value acc, Value out, Value tokenStride, Value headStride,
                      Value mult);
  /// (stage index, consumer parity) of step t.
  std::pair<Value, Value> stageOf(Value t);
  /// Descriptor bases of a step (from one HopperEmitter::opaque copy of the
  /// address bits): K's region, this warpgroup's rows of K, V and P^T, and
  /// the Q/dO stages and dS^T buffers.
  struct Bases {
    Value kRegion, kBase, vBase, qdBase, pBase, dsBase;
  };
  Bases bases();
  /// Issues S^T = K_w Q^T and dP^T = V_w dO^T of step t (one commit group),
  /// waiting for its stage when `wait` holds; without the wait (the step
  /// past the last) the stale stage is read and the results are dropped.
  /// Returns (S^T, dP^T) in flight.
  std::pair<Value, Value> issueScores(const Bases &d, Value t, Value wait);
  /// The decoded entry of a step: masked also when the key tile crosses
  /// k_len (keys past it must not reach dQ).
  TileEntry stepEntry(Value word);
  /// The masking word of a step from its entry word: the two fragment
  /// rows' visibility words (HopperEmitter::visibilityWords; loads of the
  /// column intervals in partial tiles only) packed into one i32: bit
  /// 8 (j % 4) + e + 2 (2 half + j / 4) is element (j, e) of row half `half`
  /// (the words keep bits 0 and 1 of each byte).
  Value maskWord(Value word);
  /// One query tile, software-pipelined. On entry S^T and dP^T of step t are
  /// in flight, with its entry word and masking word (computed a step
  /// ahead, while fewer accumulators are live). `carried`: dV, dK, word,
  /// S^T, dP^T, then the masking word; returns the same for step t + 1
  /// (dV, dK, S^T and dP^T in flight). `first`: dV and dK start here.
  SmallVector<Value> step(Value t, ValueRange carried, bool first);
  /// The thread's two fragment rows of the fixed tile (keys; queries in
  /// the rows kernel): their index in the sequence, clamped to its last row
  /// (`clamped`), the i64 index of their interval slots and whether they
  /// are inside the sequence (past it: the last row's slots; their
  /// gradients are dropped and they are masked out of dQ).
  void fixedRows(Value ivRow[2], Value fixValid[2],
                 Value clamped[2] = nullptr) {
    int64_t slots = rows ? v.rowSlots : v.numSlots;
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
  /// The entry word of step t (t < steps): from the column direction's
  /// list, or (row intervals) from the CTA's list in shared memory.
  Value entryWord(Value t) {
    if (rowIv)
      return load(i32,
                  sharedAt(add(listAddr, mul(remu(t, numEntries), c32(4)))), 4);
    return loadI32(gEntries, add(entryBase, remu(t, numEntries)));
  }
  /// Row intervals: the producer warpgroup's first warp lists the key
  /// tile's non-empty query tiles (of 64) in shared memory, from the row
  /// direction's tile entries of the query tiles of 128.
  void buildRowList();
  /// Row intervals: waits for the list (sm90::kBarrierRowList, all threads)
  /// and sets numEntries and steps from it.
  void rowListSteps();
  /// Row intervals: the masking word of a step (maskWord's layout): each
  /// consumer thread makes one query row's visibility of 32 keys from the
  /// row intervals, and the words are exchanged through shared memory.
  Value rowMaskWord(Value word);

  const BackwardVariant &v;
  BackwardLayout lay;
  /// The rows kernel (dQ over the row direction) rather than the main one:
  /// the fixed tile holds Q and dO (128 queries of a query head), the steps
  /// walk the key tiles (64 keys) of the row direction.
  bool rows = false;
  /// The main kernel without a column direction: its lists come from the
  /// row direction's tiles (128 x v.rowTileK) and it masks with the row
  /// intervals.
  bool rowIv = false;
  Type acc64, accD;
  int64_t dBoxes;

  // Kernel-wide values.
  Value tmRingA, tmFixA, tmFixB, tmRingB, tmMlse, tmDelta, gdQ, gdK, gdV, gIv,
      gEntries;
  Value numHeads, kvGroup, dkToken, dkHead, dvToken, dvHead, totalQ, scaleLog2,
      scale;
  // The CTA's fixed tile (128 keys of a key/value head; 128 queries of a
  // query head in the rows kernel): its head, sequence start and length, and
  // first row; the steps' dimension (queries; keys) and tile list.
  Value tid, wg, fixHead, fixStart, fixLen, fixRow, ringStart, ringLen;
  Value entryBase, numEntries, steps;
  /// base(seq) of the blocked dQ accumulator's padded rows (file comment).
  Value qBase16;
  Value smem, pad, barFixed, full, empty;
  // Consumer values.
  /// The shared base's descriptor address bits (addr >> 4): K's region.
  Value isLane0, lane2q, r0, addrBits, ldBase, pStore, dsStore, syncId;
  /// Rows kernel: -LSE log2(e) and delta of the thread's two query rows, and
  /// the arrays they come from ([heads, ldStride]).
  Value rowMlse[2], rowDelta[2], gMlse, gDelta, ldStride;
  /// Row intervals: the row direction's q_tile_base and tile_info, the
  /// batch's sequences, key tiles per sequence (the grid's bound), the
  /// tile_info row stride; the CTA's sequence, key tile and list address.
  Value gRowBase, gRowInfo, numSeqs, keyTiles, infoStride, ctaSeq, ctaTile,
      listAddr;
  /// Row intervals: the step's 64 x 4 visibility words (rowMaskWord).
  Value maskAddr;
};

} // namespace

//===----------------------------------------------------------------------===//
// Pre-pass and dQ conversion (one thread per (query row, head)).
//===----------------------------------------------------------------------===//

void BackwardBuilder::buildPre(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (O, dO, LSE, mlse, delta, total_q i64, heads i32, ld_stride i64,
  //  o_token, o_head, do_token, do_head i64); mlse and delta are
  //  [heads, ld_stride] (ld_stride >= total_q, a multiple of 4 for TMA).
  // D / 8 consecutive threads per (row, head), 16 bytes of O and dO each
  // (coalesced), summed with butterfly shuffles.
  Value gO = global(arg(bwd_pre::O)), gdO = global(arg(bwd_pre::DO)),
        gLSE = global(arg(bwd_pre::Lse));
  Value gMlse = global(arg(bwd_pre::Mlse)),
        gDelta = global(arg(bwd_pre::Delta));
  Value total = arg(bwd_pre::TotalQ), heads = zext64(arg(bwd_pre::NumHeads)),
        ldStride = arg(bwd_pre::LdStride);
  int64_t lanes = v.headDim / 8;
  Value x = globalThread();
  Value count = mul(total, heads);
  Value pairIndex = divu(x, c64(lanes));
  Value part = arith::RemUIOp::create(b, loc, x, c64(lanes));
  // Threads past the end read the last row (every lane takes part in the
  // shuffles) and store nothing.
  Value clamped = mins(pairIndex, sub(count, c64(1)));
  Value row = divu(clamped, heads);
  Value head = arith::RemUIOp::create(b, loc, clamped, heads);
  auto chunk = [&](Value base, Value tokenStride, Value headStride) {
    Value p = gep(base,
                  add(add(mul(row, tokenStride), mul(head, headStride)),
                      mul(part, c64(8))),
                  elt);
    return arith::ExtFOp::create(b, loc, VectorType::get({8}, f32),
                                 load(VectorType::get({8}, elt), p, 16));
  };
  Value o = chunk(gO, arg(bwd_pre::OTokenStride), arg(bwd_pre::OHeadStride)),
        g = chunk(gdO, arg(bwd_pre::DOTokenStride), arg(bwd_pre::DOHeadStride));
  Value sum = cF32(0.0);
  for (int64_t k = 0; k < 8; ++k)
    sum = fma(vector::ExtractOp::create(b, loc, o, ArrayRef<int64_t>{k}),
              vector::ExtractOp::create(b, loc, g, ArrayRef<int64_t>{k}), sum);
  for (int64_t offset = 1; offset < lanes; offset *= 2)
    sum = addf(sum, gpu::ShuffleOp::create(b, loc, sum, c32(offset), c32(32),
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult());
  Value first = cmp(arith::CmpIPredicate::eq, part, c64(0));
  Value inside = cmp(arith::CmpIPredicate::slt, pairIndex, count);
  ifThen(arith::AndIOp::create(b, loc, first, inside), [&] {
    Value at = add(mul(head, ldStride), row);
    store(sum, gep(gDelta, at, f32));
    Value lse = load(f32, gep(gLSE, add(mul(head, total), row), f32),
                     4); // [heads, total_q]
    store(mulf(lse, cF32(-M_LOG2E)), gep(gMlse, at, f32));
  });
  gpu::ReturnOp::create(b, loc);
}

void BackwardBuilder::buildConvert(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (dQacc, dQ, cu_q, num_seqs i32, search_steps i32 (bit width of
  //  num_seqs), float4s i64 (of dQacc), heads i32, dq_token, dq_head i64,
  //  scale f32): one float4 of the blocked accumulator (file comment) per
  //  thread: rows R and R + 8, columns c and c + 1.
  Value gAcc = global(arg(bwd_dq::DQAccumulator)),
        gdQ = global(arg(bwd_dq::DQ)), cuQ = global(arg(bwd_dq::CuSeqlensQ));
  Value numSeqs = arg(bwd_dq::NumSeqs), heads = zext64(arg(bwd_dq::NumHeads)),
        scaleArg = arg(bwd_dq::Scale);
  Value x = globalThread();
  ifThen(cmp(arith::CmpIPredicate::slt, x, arg(bwd_dq::Float4s)), [&] {
    Value lr = arith::RemUIOp::create(b, loc, x, c64(8));
    Value pairIndex =
        arith::RemUIOp::create(b, loc, divu(x, c64(8)), c64(v.headDim / 2));
    Value gh = divu(x, c64(4 * v.headDim));
    Value head = arith::RemUIOp::create(b, loc, gh, heads);
    Value padded = add(mul(divu(gh, heads), c64(16)), lr);
    // The sequence whose padded rows hold R: the last s with base(s) <= R.
    auto base = [&](Value s) {
      Value start = sext64(loadI32(cuQ, s));
      return add(bitAnd(add(start, c64(15)), c64(~int64_t(15))),
                 mul(sext64(s), c64(16)));
    };
    SmallVector<Value> range =
        loop(c64(0), sext64(arg(bwd_dq::SearchSteps)), {c32(0), numSeqs},
             [&](Value, SmallVector<Value> lh) {
               Value lo = lh[0], hi = lh[1];
               Value active =
                   cmp(arith::CmpIPredicate::sgt, sub(hi, lo), c32(1));
               Value mid = divu(add(lo, hi), c32(2));
               Value below = arith::AndIOp::create(
                   b, loc, active,
                   cmp(arith::CmpIPredicate::sle, base(mid), padded));
               Value above = arith::AndIOp::create(
                   b, loc, active,
                   arith::XOrIOp::create(b, loc, below, cBool(true)));
               return SmallVector<Value>{select(below, mid, lo),
                                         select(above, mid, hi)};
             });
    Value seq = range[0];
    Value start = loadI32(cuQ, seq);
    Value len = sext64(sub(loadI32(cuQ, add(seq, c32(1))), start));
    Value local = sub(padded, base(seq));
    Value four =
        load(VectorType::get({4}, f32), gep(gAcc, mul(x, c64(4)), f32), 16);
    for (int64_t h = 0; h < 2; ++h) {
      Value r = add(local, c64(8 * h));
      ifThen(cmp(arith::CmpIPredicate::slt, r, len), [&] {
        Value row = add(sext64(start), r);
        Value out = gep(gdQ,
                        add(add(mul(row, arg(bwd_dq::DQTokenStride)),
                                mul(head, arg(bwd_dq::DQHeadStride))),
                            mul(pairIndex, c64(2))),
                        elt);
        Value lo = mulf(
            vector::ExtractOp::create(b, loc, four, ArrayRef<int64_t>{2 * h}),
            scaleArg);
        Value hi = mulf(vector::ExtractOp::create(b, loc, four,
                                                  ArrayRef<int64_t>{2 * h + 1}),
                        scaleArg);
        store(packPair(lo, hi, elt), out);
      });
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
  Value parity = cmp(arith::CmpIPredicate::eq, bitAnd(round, c32(1)), c32(1));
  return {stage, parity};
}

void BackwardBuilder::producer() {
  Value lead = eq(tid, c32(sm90::kConsumerThreads));
  ifThen(lead, [&] {
    Value fixedHead = toIndex(fixHead);
    // The fixed tile: K and V (main), Q and dO (rows), 128 rows.
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
    forEach(c64(0), sext64(steps), [&](Value t64) {
      Value t = trunc32(t64);
      auto [stage, consumerParity] = stageOf(t);
      Value parity = arith::XOrIOp::create(b, loc, consumerParity, cBool(true));
      Value head = ringHead(t), word = entryWord(t);
      Value qRow =
          add(ringStart, mul(entryField(word, abi::kEntryTile), c32(64)));
      Value s = toIndex(stage);
      Value stageOff = add(pad, toIndex(mul(stage, c32(lay.stage))));
      waitParity(empty, s, parity);
      // The step's tile: Q and dO and their row values (main), K and V
      // (rows), 64 rows.
      expectTx(full, s, lay.stage + (rows ? 0 : 2 * kLdBox * 4));
      Value h = toIndex(head);
      for (int64_t d = 0; d < dBoxes; ++d)
        for (auto [tm, off] :
             {std::pair<Value, int64_t>{tmRingA, 0}, {tmRingB, lay.qBox}}) {
          Value dst =
              view(add(stageOff, cIdx(lay.qdOff + off + d * sm90::kBoxBytes)),
                   boxShape(sm90::kBoxRows), elt);
          nvgpu::TmaAsyncLoadOp::create(
              b, loc, dst, full, tm, ValueRange{cIdx(64 * d), h, toIndex(qRow)},
              s, Value(), Value());
        }
      if (rows)
        return;
      Value ldOff = add(
          pad, toIndex(add(mul(stage, c32(kLdStageBytes)), c32(lay.ldOff))));
      Value ldRow = toIndex(bitAnd(qRow, c32(~int64_t(3))));
      for (auto [tm, off] :
           {std::pair<Value, int64_t>{tmMlse, 0}, {tmDelta, kLdDeltaOffset}}) {
        Value dst = view(add(ldOff, cIdx(off)), {1, kLdBox}, f32);
        nvgpu::TmaAsyncLoadOp::create(
            b, loc, dst, full, tm, ValueRange{ldRow, h}, s, Value(), Value());
      }
    });
  });
}

BackwardBuilder::Bases BackwardBuilder::bases() {
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
  d.pBase = add(add(kMajor, descriptorOffset(lay.pOff)), wgRows);
  d.dsBase = add(kMajor, descriptorOffset(lay.dsOff));
  return d;
}

std::pair<Value, Value> BackwardBuilder::issueScores(const Bases &d, Value t,
                                                     Value wait) {
  auto [stage, parity] = stageOf(t);
  Value s = toIndex(stage);
  ifThen(wait, [&] { waitParity(full, s, parity); });
  Value qDesc = add(
      d.qdBase, zext64(mul(stage, c32(lay.stage >> sm90::kDescriptorShift))));
  Value doDesc = add(qDesc, descriptorOffset(lay.qBox));
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  Value sAcc = LLVM::UndefOp::create(b, loc, acc64); // scale-d 0 first
  Value pAcc = sAcc;
  for (int64_t k = 0; k < v.headDim / 16; ++k) {
    int64_t kvStep = sm90::kMajorStep(k, kFixedBoxBytes);
    int64_t qStep = sm90::kMajorStep(k, sm90::kBoxBytes);
    sAcc = wgmma(sAcc, add(d.kBase, descriptorOffset(kvStep)),
                 add(qDesc, descriptorOffset(qStep)), 64, wgmmaType, k != 0,
                 /*bKMajor=*/true);
    pAcc = wgmma(pAcc, add(d.vBase, descriptorOffset(kvStep)),
                 add(doDesc, descriptorOffset(qStep)), 64, wgmmaType, k != 0,
                 /*bKMajor=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return {sAcc, pAcc};
}

BackwardBuilder::TileEntry BackwardBuilder::stepEntry(Value word) {
  TileEntry entry = decodeEntry(word, 64, ringLen);
  // Fixed rows past the sequence (a fixed tile crossing its end) are masked
  // out: keys past k_len must not reach dQ.
  Value crosses = cmp(arith::CmpIPredicate::sgt,
                      add(sub(fixRow, fixStart), c32(128)), fixLen);
  entry.needMask = arith::OrIOp::create(b, loc, entry.needMask, crosses);
  return entry;
}

Value BackwardBuilder::maskWord(Value word) {
  if (rowIv)
    return rowMaskWord(word);
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

SmallVector<Value> BackwardBuilder::step(Value t, ValueRange carried,
                                         bool first) {
  Value dV = carried[0], dK = carried[1], word = carried[2], sAcc = carried[3],
        pAcc = carried[4];
  Value words = carried[5];
  // The next step's entry word now, used at the end of the step (its
  // masking word) and in the next step.
  Value last = sub(steps, c32(1));
  Value nextWord = entryWord(mins(add(t, c32(1)), last));
  Value head = ringHead(t);
  TileEntry entry = stepEntry(word);
  Value stage = stageOf(t).first;

  // S^T(t), dP^T(t) and the previous step's dV, dK complete: the previous
  // step's stage is free.
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  Value prevStage = stageOf(add(t, c32(lay.stages - 1))).first;
  expectTx(empty, toIndex(prevStage), 0,
           arith::AndIOp::create(b, loc, isLane0,
                                 cmp(arith::CmpIPredicate::sgt, t, c32(0))));

  Value ivRow[2], fixValid[2];
  fixedRows(ivRow, fixValid);

  // P^T and dS^T on the fragments (row = key, column = query 8j + 2q + e;
  // the rows kernel: P and dS, row = query, column = key),
  // 8 columns at a time: masked (partial tiles and tiles crossing q_len or
  // k_len only) and stored to shared memory, P^T at [wg], dS^T at
  // [t % 2][wg] (128B swizzle).
  SmallVector<Value> sv = extractAll(sAcc, 32), dpv = extractAll(pAcc, 32);
  Value ldStage = add(ldBase, mul(stage, c32(kLdStageBytes)));
  Value buffer = bitAnd(t, c32(1));
  Value dsOff = mul(buffer, c32(2 * sm90::kBoxBytes));
  Value zero = cF32(0.0);
  for (int64_t j = 0; j < 8; ++j) {
    Value col = add(lane2q, c32(8 * j));
    auto ldPair = [&](int64_t off) {
      // Scalar loads: the rows start 4 (q_start % 4) bytes into the box.
      Value addr = add(ldStage, add(c32(off), mul(col, c32(4))));
      std::array<Value, 2> pair;
      for (int64_t e2 = 0; e2 < 2; ++e2)
        pair[e2] = load(f32,
                        LLVM::IntToPtrOp::create(
                            b, loc, sptr, zext64(add(addr, c32(4 * e2)))),
                        4);
      return pair;
    };
    // -LSE log2(e) and delta of element i: per column (query) from the
    // stage's row values (main), per row (query) from registers (rows).
    std::array<Value, 2> mlse, delta;
    if (rows) {
      mlse = {rowMlse[0], rowMlse[1]};
      delta = {rowDelta[0], rowDelta[1]};
    } else {
      mlse = ldPair(0);
      delta = ldPair(kLdDeltaOffset);
    }
    auto statOf = [&](int64_t i) { return rows ? (i >> 1) & 1 : i & 1; };
    SmallVector<Value> group; // p of the 4 elements, then their dS
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i)
      group.push_back(ex2(fma(sv[i], scaleLog2, mlse[statOf(i)])));
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i)
      group.push_back(
          mulf(group[i - 4 * j],
               arith::SubFOp::create(b, loc, dpv[i], delta[statOf(i)])));
    SmallVector<Type> types(8, f32);
    group = ifElse(
        entry.needMask, types,
        [&] {
          SmallVector<Value> out(8);
          for (int64_t i = 4 * j; i < 4 * j + 4; ++i) {
            int64_t half = (i >> 1) & 1, bit = 8 * (j % 4) + (i & 1);
            Value set =
                cmp(arith::CmpIPredicate::ne,
                    bitAnd(words,
                           c32(int64_t(1) << (bit + 2 * (half * 2 + j / 4)))),
                    c32(0));
            set = arith::AndIOp::create(b, loc, set, fixValid[half]);
            out[i - 4 * j] = select(set, group[i - 4 * j], zero);
            out[4 + i - 4 * j] = select(set, group[4 + i - 4 * j], zero);
          }
          return out;
        },
        [&] { return group; });
    // The 16-byte chunk j of rows r0 and r0 + 8 (the next atom), swizzled.
    Value chunk = mul(arith::XOrIOp::create(b, loc, bitAnd(r0, c32(7)), c32(j)),
                      c32(sm90::kChunkBytes));
    for (int h = 0; h < 2; ++h) {
      Value off = add(chunk, c32(h * sm90::kAtomBytes));
      auto at = [&](Value base) {
        return LLVM::IntToPtrOp::create(b, loc, sptr, zext64(add(base, off)));
      };
      if (!rows) // dV's P^T (the rows kernel needs dS alone)
        store(packPair(group[2 * h], group[2 * h + 1], elt), at(pStore));
      store(packPair(group[4 + 2 * h], group[4 + 2 * h + 1], elt),
            at(add(dsStore, dsOff)));
    }
  }
  // Main: D = 128's dQ reads both warpgroups' dS^T; rows: each warpgroup
  // reads its own dS.
  asyncProxyBarrier(syncId,
                    rows ? sm90::kWarpgroupThreads : sm90::kConsumerThreads);

  // dQ = dS K (its own commit group, first), then dV += P^T dO and
  // dK += dS^T Q (k = 64 queries).
  // dQ: D = 128: this warpgroup's 64 columns over all 128 keys (both
  // warpgroups' dS^T, read transposed); D = 64: all columns over its own
  // 64 keys (the two warpgroups' sums meet in the atomics).
  // The first k-step ignores its input (scale-d 0): undef, so that no zero
  // registers are set while other wgmmas are in flight.
  // Descriptor bases made here (a fresh opaque copy), not kept live
  // across the elementwise part.
  Bases d = bases();
  Value qDesc = add(
      d.qdBase, zext64(mul(stage, c32(lay.stage >> sm90::kDescriptorShift))));
  Value doDesc = add(qDesc, descriptorOffset(lay.qBox));
  Value dsDesc =
      add(d.dsBase, zext64(mul(buffer, c32((2 * sm90::kBoxBytes) >>
                                           sm90::kDescriptorShift))));
  Value mnQ = bitOr(descriptorAddress(qDesc), c64(sm90::kMNMajorBits));
  Value dsOwn = add(dsDesc, mul(zext64(wg), descriptorOffset(sm90::kBoxBytes)));
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  if (rows) {
    // dQ_w += dS_w K(t): the main kernel's dK += dS^T Q with the step's K
    // in Q's place (carried as dK).
    for (int64_t k = 0; k < sm90::kStepsPerRow; ++k)
      dK = wgmma(dK, add(dsOwn, descriptorOffset(k * sm90::kStepBytesK)),
                 add(mnQ, descriptorOffset(k * sm90::kStepBytesMN)), v.headDim,
                 wgmmaType, !first || k != 0, /*bKMajor=*/false);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    Value nextWords = maskWord(nextWord);
    Value next = add(t, c32(1));
    auto [sNext, pNext] =
        issueScores(bases(), next, cmp(arith::CmpIPredicate::slt, next, steps));
    return {dV, dK, nextWord, sNext, pNext, nextWords};
  }
  Value dqAcc = LLVM::UndefOp::create(b, loc, acc64);
  // MN-major descriptors: the address bits are summed and masked before the
  // layout bits are set (a sum that carries into the layout bits is
  // miscompiled by ptxas 13: the upper word of the constant was dropped).
  auto mnMajor = [&](Value region, Value offset) {
    return bitOr(descriptorAddress(add(region, offset)),
                 c64(sm90::kMNMajorBits));
  };
  Value dsRegion = descriptorAddress(dsDesc);
  Value wgRows = zext64(wg);
  int64_t kSteps = v.headDim == 128 ? 8 : 4;
  for (int64_t k = 0; k < kSteps; ++k) {
    Value a, bk;
    if (v.headDim == 128) {
      a = mnMajor(dsRegion,
                  descriptorOffset(sm90::mnMajorStep(k, sm90::kBoxBytes)));
      // K's rows of this step, columns 64 wg .. 64 wg + 63 (the wg-th box).
      bk = mnMajor(d.kRegion,
                   add(descriptorOffset(k * sm90::kStepBytesMN),
                       mul(wgRows, descriptorOffset(kFixedBoxBytes))));
    } else {
      Value rows = mul(wgRows, descriptorOffset(sm90::kBoxBytes));
      a = mnMajor(dsRegion,
                  add(rows, descriptorOffset(k * sm90::kStepBytesMN)));
      bk = mnMajor(d.kRegion,
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
  Value mnDO = bitOr(descriptorAddress(doDesc), c64(sm90::kMNMajorBits));
  for (int64_t k = 0; k < sm90::kStepsPerRow; ++k) {
    // The first step's first k-step sets dV and dK (scale-d 0, undef in).
    bool accumulate = !first || k != 0;
    Value stepK = descriptorOffset(k * sm90::kStepBytesK);
    Value stepMN = descriptorOffset(k * sm90::kStepBytesMN);
    dV = wgmma(dV, add(d.pBase, stepK), add(mnDO, stepMN), v.headDim, wgmmaType,
               accumulate, /*bKMajor=*/false);
    dK = wgmma(dK, add(dsOwn, stepK), add(mnQ, stepMN), v.headDim, wgmmaType,
               accumulate, /*bKMajor=*/false);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  // dQ done; dV and dK run on under the atomics and the next step's scores.
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);

  // dQ rows (queries) r0, r0 + 8 of the tile, columns 8 j + 2 q + {0, 1}:
  // fragment values 4j .. 4j+3 are one float4 of the blocked accumulator
  // (file comment). Rows past q_len add zeros; a group whose first row is
  // past it adds nothing.
  SmallVector<Value> dq = extractAll(dqAcc, 32);
  Value colBase = v.headDim == 128 ? mul(wg, c32(64)) : c32(0);
  Value firstRow = add(entry.tileStart, r0);
  ifThen(cmp(arith::CmpIPredicate::slt, firstRow, ringLen), [&] {
    Value group = zext64(shr(add(qBase16, firstRow), c32(4)));
    Value chunk = mul(add(mul(group, zext64(numHeads)), zext64(head)),
                      c64(16 * v.headDim));
    Value within = add(
        mul(zext64(add(shr(colBase, c32(1)), shr(lane2q, c32(1)))), c64(32)),
        mul(zext64(bitAnd(r0, c32(7))), c64(4)));
    Value at = gep(gdQ, add(chunk, within), f32);
    for (int64_t j = 0; j < 8; ++j)
      redAddV4(gepBytes(at, 4 * 128 * j), ArrayRef<Value>(dq).slice(4 * j, 4));
  });

  // The next step's masking word (while S^T and dP^T are not live), then
  // its scores (past the last step: the stale stage, dropped).
  Value nextWords = maskWord(nextWord);
  Value next = add(t, c32(1));
  auto [sNext, pNext] =
      issueScores(bases(), next, cmp(arith::CmpIPredicate::slt, next, steps));
  SmallVector<Value> out{dV, dK, nextWord, sNext, pNext};
  out.push_back(nextWords);
  return out;
}

void BackwardBuilder::consumer() {
  // Row intervals: the list first (setmaxnreg.inc waits for the producer's
  // decrease, which follows the list).
  if (rowIv)
    rowListSteps();
  consumerRegisters();
  Value lane = bitAnd(tid, c32(31));
  isLane0 = cmp(arith::CmpIPredicate::eq, lane, c32(0));
  lane2q = mul(bitAnd(lane, c32(3)), c32(2));
  r0 = add(mul(bitAnd(shr(tid, c32(5)), c32(3)), c32(16)), shr(lane, c32(2)));
  Value base = fromIndex(
      add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem), pad),
      i64);
  addrBits = descriptorAddressOf(base);
  Value base32 = trunc32(base);
  // The LD boxes start at the query tile's first row rounded down to a
  // multiple of 4 (tiles start at q_start + 64 i).
  ldBase =
      add(add(base32, c32(lay.ldOff)), mul(bitAnd(ringStart, c32(3)), c32(4)));
  Value rowBytes =
      add(mul(r0, c32(sm90::kRowBytes)), mul(bitAnd(lane, c32(3)), c32(4)));
  Value wgBox = mul(wg, c32(sm90::kBoxBytes));
  pStore = add(add(base32, c32(lay.pOff)), add(wgBox, rowBytes));
  dsStore = add(add(base32, c32(lay.dsOff)), add(wgBox, rowBytes));
  // One barrier for both warpgroups (main), one per warpgroup (rows).
  syncId = rows ? add(wg, c32(sm90::kBarrierWarpgroup))
                : c32(sm90::kBarrierConsumers);
  if (rows) {
    Value ivRow[2], fixValid[2], clamped[2];
    fixedRows(ivRow, fixValid, clamped);
    for (int h = 0; h < 2; ++h) {
      Value at = add(mul(zext64(fixHead), ldStride),
                     sext64(add(fixStart, clamped[h])));
      rowMlse[h] = load(f32, gep(gMlse, at, f32), 4);
      rowDelta[h] = load(f32, gep(gDelta, at, f32), 4);
    }
  }

  Value zero = LLVM::ZeroOp::create(b, loc, accD);
  SmallVector<Value> grads = ifElse(
      cmp(arith::CmpIPredicate::sgt, steps, c32(0)), {accD, accD},
      [&] {
        waitParity(barFixed, cIdx(0), cBool(false));
        Value word = entryWord(c32(0));
        Value words = maskWord(word);
        auto [s0, p0] = issueScores(bases(), c32(0), cBool(true));
        // The first step peeled: dV and dK start with scale-d 0 (zeros set
        // while S^T and dP^T are in flight would serialize the wgmmas).
        Value undef = LLVM::UndefOp::create(b, loc, accD);
        SmallVector<Value> init{undef, undef, word, s0, p0, words};
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

  // Main: dK * scale and dV of this warpgroup's 64 keys; rows: dQ * scale
  // of its 64 queries (the main kernel's dK accumulator).
  storeFixedRows(grads[1], rows ? gdQ : gdK, dkToken, dkHead, scale);
  if (!rows)
    storeFixedRows(grads[0], gdV, dvToken, dvHead, Value());
}

void BackwardBuilder::storeFixedRows(Value acc, Value out, Value tokenStride,
                                     Value headStride, Value mult) {
  // Rows r0 and r0 + 8, columns 8 j + 2 q + {0, 1}.
  Value ivRow[2], fixValid[2];
  fixedRows(ivRow, fixValid);
  SmallVector<Value> values = extractAll(acc, v.headDim / 2);
  for (int h = 0; h < 2; ++h)
    ifThen(fixValid[h], [&] {
      Value row = add(sub(fixRow, fixStart),
                      add(mul(wg, c32(64)), add(r0, c32(8 * h))));
      Value token = sext64(add(fixStart, row));
      Value at = gep(
          out,
          add(add(mul(token, tokenStride), mul(zext64(fixHead), headStride)),
              zext64(lane2q)),
          elt);
      for (int64_t j = 0; j < v.headDim / 8; ++j) {
        Value lo = values[4 * j + 2 * h], hi = values[4 * j + 2 * h + 1];
        if (mult) {
          lo = mulf(lo, mult);
          hi = mulf(hi, mult);
        }
        store(packPair(lo, hi, elt), gepBytes(at, 16 * j));
      }
    });
}

void BackwardBuilder::buildMain(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
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
  if (v.rowTileK) {
    // Row intervals: (..., cu_seqlens_q, cu_seqlens_k, row intervals,
    //  q_tile_base, tile_info of the row direction's 128 x rowTileK tiles;
    //  heads i32, kv_group i32, num_seqs i32, key_tiles i32 (the grid's key
    //  tiles per sequence: ceil(max_seqlen_k / 128)), info_stride i32 (the
    //  tile_info row: 16 nkt_words), dk/dv strides, total_q, scales).
    rowIv = true;
    Value cuQ = global(arg(bwd_rows::CuSeqlensQ)),
          cuK = global(arg(bwd_rows::CuSeqlensK));
    gIv = global(arg(bwd_rows::Intervals));
    gRowBase = global(arg(bwd_rows::QTileBase));
    gRowInfo = global(arg(bwd_rows::TileInfo));
    numHeads = arg(bwd_rows::NumHeads);
    kvGroup = arg(bwd_rows::KvGroup);
    numSeqs = arg(bwd_rows::NumSeqs);
    keyTiles = arg(bwd_rows::KeyTiles);
    infoStride = arg(bwd_rows::InfoStride);
    dkToken = arg(bwd_rows::DKTokenStride);
    dkHead = arg(bwd_rows::DKHeadStride);
    dvToken = arg(bwd_rows::DVTokenStride);
    dvHead = arg(bwd_rows::DVHeadStride);
    totalQ = arg(bwd_rows::TotalQ);
    scaleLog2 = arg(bwd_rows::ScaleLog2);
    scale = arg(bwd_rows::Scale);
    buildCommon({}, cuK, cuQ, divu(numHeads, kvGroup));
    return;
  }
  auto [cuQ, cuK, tiles] = walkArgs(body, bwd::CuSeqlensQ);
  numHeads = arg(bwd::NumHeads);
  kvGroup = arg(bwd::KvGroup);
  dkToken = arg(bwd::DKTokenStride);
  dkHead = arg(bwd::DKHeadStride);
  dvToken = arg(bwd::DVTokenStride);
  dvHead = arg(bwd::DVHeadStride);
  totalQ = arg(bwd::TotalQ);
  scaleLog2 = arg(bwd::ScaleLog2);
  scale = arg(bwd::Scale);
  buildCommon(tiles, cuK, cuQ, divu(numHeads, kvGroup));
}

void BackwardBuilder::buildRows(gpu::GPUFuncOp func) {
  rows = true;
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (tmQ, tmK, tmV, tmdO: boxes of 128, 64, 64, 128 rows; dQ, mlse, delta,
  //  cu_seqlens_q, cu_seqlens_k, row intervals, q_tile_seq, q_tile_base,
  //  counts, tile_offsets, tile_entries, tile_order of the row direction's
  //  128x64 tiles; heads i32, kv_group i32, ld_stride i64, dq_token i64,
  //  dq_head i64, scale_log2 f32, scale f32)
  tmFixA = tensorMapArg(arg(bwd_dqr::TmQ), boxShape(kFixedRows), elt, true);
  tmRingA =
      tensorMapArg(arg(bwd_dqr::TmK), boxShape(sm90::kBoxRows), elt, true);
  tmRingB =
      tensorMapArg(arg(bwd_dqr::TmV), boxShape(sm90::kBoxRows), elt, true);
  tmFixB = tensorMapArg(arg(bwd_dqr::TmDO), boxShape(kFixedRows), elt, true);
  gdQ = global(arg(bwd_dqr::DQ));
  gMlse = global(arg(bwd_dqr::Mlse));
  gDelta = global(arg(bwd_dqr::Delta));
  auto [cuQ, cuK, tiles] = walkArgs(body, bwd_dqr::CuSeqlensQ);
  numHeads = arg(bwd_dqr::NumHeads);
  kvGroup = arg(bwd_dqr::KvGroup);
  ldStride = arg(bwd_dqr::LdStride);
  dkToken = arg(bwd_dqr::DQTokenStride);
  dkHead = arg(bwd_dqr::DQHeadStride);
  scaleLog2 = arg(bwd_dqr::ScaleLog2);
  scale = arg(bwd_dqr::Scale);
  buildCommon(tiles, cuQ, cuK, numHeads);
}

std::tuple<Value, Value, SmallVector<Value>>
BackwardBuilder::walkArgs(Block &body, int first) {
  // The same run of arguments in the main kernel and the rows kernel.
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
  return {arg(bwd::CuSeqlensQ),
          arg(bwd::CuSeqlensK),
          {arg(bwd::KTileSeq), arg(bwd::KTileBase), arg(bwd::Counts),
           arg(bwd::TileOffsets), arg(bwd::TileOrder)}};
}

void BackwardBuilder::buildCommon(ArrayRef<Value> tiles, Value cuFixed,
                                  Value cuRing, Value ctaHeads) {
  tid = fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i32);
  Value bid = fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i32);
  // The CTA's fixed tile (`local` of sequence `seq`), then everything else.
  auto run = [&](Value seq, Value local, Value tile) {
    fixStart = loadI32(cuFixed, seq);
    fixLen = sub(loadI32(cuFixed, add(seq, c32(1))), fixStart);
    ringStart = loadI32(cuRing, seq);
    ringLen = sub(loadI32(cuRing, add(seq, c32(1))), ringStart);
    fixRow = add(fixStart, mul(local, c32(kFixedRows)));
    qBase16 = add(bitAnd(add(ringStart, c32(15)), c32(~int64_t(15))),
                  mul(seq, c32(16)));
    if (!rowIv) {
      Value offsets = tiles[3];
      entryBase = loadI32(offsets, tile);
      numEntries = sub(loadI32(offsets, add(tile, c32(1))), entryBase);
    }
    // Warp-uniform (lane 0's), so that what derives from it can live in
    // uniform registers.
    wg = gpu::ShuffleOp::create(b, loc, shr(tid, c32(sm90::kWarpgroupShift)),
                                c32(0), c32(32), gpu::ShuffleMode::IDX)
             .getShuffleResult();

    barFixed = barrierGroup(1);
    full = barrierGroup(lay.stages);
    empty = barrierGroup(lay.stages);
    ifThen(cmp(arith::CmpIPredicate::eq, tid, c32(0)), [&] {
      nvgpu::MBarrierInitOp::create(b, loc, barFixed, cIdx(1), cIdx(0),
                                    Value());
      for (int64_t s = 0; s < lay.stages; ++s) {
        nvgpu::MBarrierInitOp::create(b, loc, full, cIdx(1), cIdx(s), Value());
        // Released by lane 0 of each consumer warp.
        nvgpu::MBarrierInitOp::create(
            b, loc, empty, cIdx(sm90::kConsumerThreads / 32), cIdx(s), Value());
      }
      for (Value tm : {tmRingA, tmFixA, tmFixB, tmRingB})
        nvgpu::TmaPrefetchOp::create(b, loc, tm, Value());
      if (!rows)
        for (Value tm : {tmMlse, tmDelta})
          nvgpu::TmaPrefetchOp::create(b, loc, tm, Value());
    });
    gpu::BarrierOp::create(b, loc);
    std::tie(smem, pad) = alignedSharedMemory();
    if (rowIv) {
      ctaSeq = seq;
      ctaTile = local;
      listAddr = trunc32(fromIndex(
          add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem),
              add(pad, cIdx(lay.listOff))),
          i64));
      maskAddr = add(listAddr, c32(lay.maskOff - lay.listOff));
    } else {
      steps = rows ? numEntries : mul(numEntries, kvGroup);
    }

    auto ifOp = scf::IfOp::create(b, loc, eq(wg, c32(sm90::kProducerWarpgroup)),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    if (rowIv) {
      // The producer's first warp lists the tiles, with the launch's
      // registers (before setmaxnreg; in the prologue shared by all
      // warpgroups the list made ptxas spill in the consumers' loop).
      buildRowList();
      rowListSteps();
    }
    producerRegisters();
    ifThen(cmp(arith::CmpIPredicate::sgt, steps, c32(0)), [&] { producer(); });
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    consumer();
  };

  if (rowIv) {
    // Row intervals: CTA (head, sequence, key tile), heads outermost; the
    // key tiles past the sequence's keys have nothing to do.
    Value perHead = mul(numSeqs, keyTiles);
    ifThen(cmp(arith::CmpIPredicate::ult, bid, mul(ctaHeads, perHead)), [&] {
      fixHead = divu(bid, perHead);
      Value rest = remu(bid, perHead);
      Value seq = divu(rest, keyTiles), local = remu(rest, keyTiles);
      Value keys =
          sub(loadI32(cuFixed, add(seq, c32(1))), loadI32(cuFixed, seq));
      ifThen(cmp(arith::CmpIPredicate::slt, mul(local, c32(kFixedRows)), keys),
             [&] { run(seq, local, Value()); });
    });
    gpu::ReturnOp::create(b, loc);
    return;
  }
  Value tileSeq = tiles[0], tileBase = tiles[1], counts = tiles[2],
        order = tiles[4];
  // The grid covers the batch's bound on tiles (abi::batchQTiles) x heads;
  // the batch has n tiles per head, in `order` heaviest first. The heaviest
  // quarter of every head runs first (heads outermost, so that CTAs that run
  // together share the steps' tiles in L2), then the rest: a heavy tile of the
  // last head no longer ends the launch alone (the tail of masks whose tiles
  // differ much in work, such as the shared-prompt RM's prompt keys).
  Value numTiles = loadI32(counts, c32(0));
  Value heavy = divu(add(numTiles, c32(3)), c32(4));
  Value light = sub(numTiles, heavy);
  Value inHeavy = cmp(arith::CmpIPredicate::ult, bid, mul(ctaHeads, heavy));
  Value rest = sub(bid, mul(ctaHeads, heavy));
  Value perPhase = select(inHeavy, heavy, maxs(light, c32(1)));
  Value phaseBid = select(inHeavy, bid, rest);
  Value slot = add(select(inHeavy, c32(0), heavy), remu(phaseBid, perPhase));
  Value inBatch = cmp(arith::CmpIPredicate::ult, bid, mul(ctaHeads, numTiles));
  ifThen(inBatch, [&] {
    fixHead = divu(phaseBid, perPhase);
    Value tile = loadI32(order, slot);
    Value seq = loadI32(tileSeq, tile);
    run(seq, sub(tile, loadI32(tileBase, seq)), tile);
  });
  gpu::ReturnOp::create(b, loc);
}

void BackwardBuilder::buildRowList() {
  // Lane l of the producer warpgroup's first warp takes the query tiles of
  // 128 rows Q = 32 r + l: the row direction's entries of (Q, the key
  // tile's 128 / rowTileK k tiles) make one entry for each of Q's halves of
  // 64 rows inside q_len: empty when every part is, full when every
  // in-bounds part is, else partial with the union of the parts' slot
  // ranges. Ballots keep the list in query order (so that dK and dV sum in
  // a fixed order).
  int64_t parts = 128 / v.rowTileK;
  Value capacity = c32(kRowListCapacity);
  Value countAddr = add(listAddr, c32(4 * kRowListCapacity));
  // The producer warpgroup's first warp.
  Value lane = sub(tid, c32(sm90::kConsumerThreads));
  ifThen(cmp(arith::CmpIPredicate::ult, lane, c32(32)), [&] {
    Value qLen = ringLen, kLen = fixLen, tileK = ctaTile;
    Value numQ = divu(add(qLen, c32(127)), c32(128));
    Value qBase = loadI32(gRowBase, ctaSeq);
    Value rounds = divu(add(numQ, c32(31)), c32(32));
    Value below = NVVM::LaneMaskLtOp::create(b, loc, i32);
    auto ballot = [&](Value pred) {
      return NVVM::VoteSyncOp::create(b, loc, i32, c32(-1), pred,
                                      NVVM::VoteSyncKind::ballot)
          .getResult();
    };
    auto popc = [&](Value x) {
      return LLVM::CtPopOp::create(b, loc, i32, x).getResult();
    };
    SmallVector<Value> count = loop(
        c64(0), zext64(rounds), {c32(0)},
        [&](Value r, SmallVector<Value> carried) {
          Value q = add(mul(trunc32(r), c32(32)), lane);
          Value valid = cmp(arith::CmpIPredicate::ult, q, numQ);
          Value nonEmpty = cBool(false), allFull = cBool(true);
          Value k0 = c32(abi::kMaxSlots), end = c32(0);
          for (int64_t w = 0; w < parts; ++w) {
            Value kt = add(mul(tileK, c32(parts)), c32(w));
            Value inK =
                cmp(arith::CmpIPredicate::slt, mul(kt, c32(v.rowTileK)), kLen);
            Value ok = arith::AndIOp::create(b, loc, valid, inK);
            Value at = select(
                ok,
                add(mul(zext64(add(qBase, q)), zext64(infoStride)), zext64(kt)),
                c64(0));
            Value word = select(ok, loadI32(gRowInfo, at), c32(0));
            Value ne = cmp(arith::CmpIPredicate::ne, word, c32(0));
            Value isFull = eq(entryField(word, abi::kEntryState),
                              c32(int(abi::TileState::Full)));
            Value wk0 = entryField(word, abi::kEntryFirstSlot);
            Value wEnd = add(wk0, entryField(word, abi::kEntrySlotCount));
            nonEmpty = arith::OrIOp::create(b, loc, nonEmpty, ne);
            allFull = arith::AndIOp::create(
                b, loc, allFull,
                arith::OrIOp::create(
                    b, loc, isFull,
                    arith::XOrIOp::create(b, loc, inK, cBool(true))));
            k0 = select(ne, mins(k0, wk0), k0);
            end = select(ne, maxs(end, wEnd), end);
          }
          Value bits =
              entryFields(select(allFull, c32(int(abi::TileState::Full)),
                                 c32(int(abi::TileState::Partial))),
                          k0, maxs(sub(end, k0), c32(0)));
          // Q's halves: the second only when it starts inside q_len.
          Value second = cmp(arith::CmpIPredicate::slt,
                             mul(add(mul(q, c32(2)), c32(1)), c32(64)), qLen);
          Value one = nonEmpty;
          Value two = arith::AndIOp::create(b, loc, nonEmpty, second);
          Value b1 = ballot(one), b2 = ballot(two);
          Value pos = add(carried[0], add(popc(bitAnd(b1, below)),
                                          popc(bitAnd(b2, below))));
          for (int64_t h = 0; h < 2; ++h) {
            Value at = add(pos, c32(h));
            Value write = arith::AndIOp::create(
                b, loc, h ? two : one,
                cmp(arith::CmpIPredicate::ult, at, capacity));
            ifThen(write, [&] {
              store(bitOr(add(mul(q, c32(2)), c32(h)), bits),
                    sharedAt(add(listAddr, mul(at, c32(4)))));
            });
          }
          return SmallVector<Value>{add(carried[0], add(popc(b1), popc(b2)))};
        });
    ifThen(cmp(arith::CmpIPredicate::eq, lane, c32(0)),
           [&] { store(count[0], sharedAt(countAddr)); });
  });
}

void BackwardBuilder::rowListSteps() {
  // All threads: the list's stores before it.
  namedBarrier(c32(sm90::kBarrierRowList), AttentionVariant::kThreads);
  numEntries = load(i32, sharedAt(add(listAddr, c32(4 * kRowListCapacity))), 4);
  entryBase = c32(0);
  // Never reached through the runtime (it refuses longer query sequences):
  // a list that does not fit stops the kernel rather than drop tiles.
  ifThen(cmp(arith::CmpIPredicate::ugt, numEntries, c32(kRowListCapacity)),
         [&] { LLVM::Trap::create(b, loc); });
  steps = mul(numEntries, kvGroup);
}

Value BackwardBuilder::rowMaskWord(Value word) {
  TileEntry entry = stepEntry(word);
  return ifElse(
      entry.needMask, {i32},
      [&] {
        // The rows' visibility, then transposed through shared memory: the
        // 256 consumer threads make one 32-key word each, (query row c / 4
        // of the step's tile, keys 32 (c % 4) .. of the key tile), from the
        // row's slots [k0, k0 + nslots) (a full tile crossing q_len or
        // k_len: all keys of the rows inside q_len); after a barrier each
        // thread reads its 16 query columns' words and takes the bits of its
        // two keys. Keys past k_len are dropped by fixValid.
        Value k0 = entryField(entry.word, abi::kEntryFirstSlot);
        Value end =
            select(entry.isPartial,
                   add(k0, entryField(entry.word, abi::kEntrySlotCount)), k0);
        Value row = shr(tid, c32(2)), part = bitAnd(tid, c32(3));
        Value q = add(entry.tileStart, row);
        Value inside = cmp(arith::CmpIPredicate::slt, q, ringLen);
        Value ivRow = mul(sext64(add(ringStart, mins(q, sub(ringLen, c32(1))))),
                          c64(v.rowSlots));
        Value keyBase = add(sub(fixRow, fixStart), mul(part, c32(32)));
        Value init = select(entry.isPartial, c32(0), c32(-1));
        SmallVector<Value> bits = loop(
            sext64(k0), sext64(end), {init},
            [&](Value k, SmallVector<Value> acc) {
              Value pair = load(i64, gep(gIv, add(ivRow, k), i64), 8);
              Value lo = sub(trunc32(pair), keyBase);
              Value hi =
                  sub(trunc32(arith::ShRUIOp::create(b, loc, pair, c64(32))),
                      keyBase);
              Value from = maxs(lo, c32(0));
              Value width = maxs(sub(hi, from), c32(0));
              return SmallVector<Value>{
                  bitOr(acc[0],
                        ptx("bmsk.clamp.b32 $0, $1, $2;", i32, {from, width}))};
            });
        Value own = select(inside, bits[0], c32(0));
        store(own, sharedAt(add(maskAddr, mul(tid, c32(4)))));
        namedBarrier(c32(sm90::kBarrierRowWords), sm90::kConsumerThreads);
        // Element (j, e) of row half h: key wg 64 + r0 + 8 h (one word of
        // 32 keys for both halves), query 8 j + 2 q + e; its bit in the
        // packed word is maskWord's, 8 (j % 4) + e + 2 (2 h + j / 4).
        Value myKeys = add(mul(wg, c32(64)), r0);
        Value wordOff = mul(shr(myKeys, c32(5)), c32(4));
        Value shift = bitAnd(myKeys, c32(31));
        Value packed = c32(0);
        for (int64_t j = 0; j < 8; ++j)
          for (int64_t el = 0; el < 2; ++el) {
            Value column = add(lane2q, c32(8 * j + el));
            Value w = load(
                i32,
                sharedAt(add(maskAddr, add(mul(column, c32(16)), wordOff))), 4);
            Value mine = shr(w, shift); // key r0 at bit 0, r0 + 8 at bit 8
            int64_t at = 8 * (j % 4) + el + 2 * (j / 4);
            packed = bitOr(packed, shl(bitAnd(mine, c32(1)), c32(at)));
            packed = bitOr(packed,
                           shl(bitAnd(shr(mine, c32(8)), c32(1)), c32(at + 4)));
          }
        return SmallVector<Value>{packed};
      },
      [&] { return SmallVector<Value>{c32(0)}; })[0];
}

void mlir::cmask::buildAttentionBackward(gpu::GPUModuleOp gpuModule,
                                         llvm::StringRef name,
                                         const BackwardVariant &variant,
                                         Location loc) {
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto kernel = [&](llvm::StringRef suffix,
                    const ::cmask::abi::Signature &signature, int32_t threads,
                    std::optional<int32_t> minBlocks = std::nullopt) {
    b.setInsertionPointToEnd(gpuModule.getBody());
    return createKernel(b, loc, (name + suffix).str(), signature, threads,
                        minBlocks);
  };
  BackwardBuilder(b, loc, variant)
      .buildPre(kernel("_pre", bwd_pre::kSignature, bwd_pre::kThreads));
  BackwardBuilder(b, loc, variant)
      .buildMain(
          kernel("", variant.rowTileK ? bwd_rows::kSignature : bwd::kSignature,
                 AttentionVariant::kThreads, /*minBlocks=*/1));
  BackwardBuilder(b, loc, variant)
      .buildConvert(kernel("_dq", bwd_dq::kSignature, bwd_dq::kThreads));
  BackwardBuilder(b, loc, variant)
      .buildRows(kernel("_dqr", bwd_dqr::kSignature, AttentionVariant::kThreads,
                        /*minBlocks=*/1));
}
