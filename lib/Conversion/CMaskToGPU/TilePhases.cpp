//===- TilePhases.cpp - Tile states and tile lists of the descriptor ------===//
//
// The phases after the row phase (docs/descriptor.md), for one tile shape
// TQ x TK. Each is a function of one work item; all share one signature:
//
//   (%item: index, %num_seqs: i32, %nkt_words: i32,
//    %cu_seqlens_q, %cu_seqlens_k, %intervals, %merged,
//    %q_tile_base [B+1], %q_tile_seq [NQT], %counts [1+NQT],
//    %tile_state [NQT*W], %tile_info [NQT*W*16],
//    %tile_offsets [NQT+1], %tile_entries [...], %tile_order [NQT],
//    %scratch [W*16+2])                      (all memref<?xi32>)
//
// where W = nkt_words (16 k tiles per state word) and NQT the number of
// global q tiles (counts[0], computed by the first phase).
//
//   seqs  (1 item)         q-tile bases and the sequence of every q tile
//   tiles (NQT*W items)    16 tile states and entry words per item
//   count (NQT items)      non-empty tiles per q tile
//   scan  (1 item)         CSR offsets; q tiles by descending count
//   fill  (NQT items)      the entries, in ascending k-tile order
//
//===----------------------------------------------------------------------===//

#include "PreprocessPhases.h"

#include "ScfEmitter.h"

using namespace mlir;
using namespace mlir::cmask;
using namespace mlir::cmask::preprocess;

namespace {
/// The arguments of a tile-phase item function, by name.
struct TileArgs {
  Value item, numSeqs, nktWords, cuQ, cuK, intervals, merged, qTileBase,
      qTileSeq, counts, tileState, tileInfo, tileOffsets, tileEntries,
      tileOrder, scratch;

  explicit TileArgs(Block *body) {
    auto a = body->getArguments();
    item = a[0];
    numSeqs = a[1];
    nktWords = a[2];
    cuQ = a[3];
    cuK = a[4];
    intervals = a[5];
    merged = a[6];
    qTileBase = a[7];
    qTileSeq = a[8];
    counts = a[9];
    tileState = a[10];
    tileInfo = a[11];
    tileOffsets = a[12];
    tileEntries = a[13];
    tileOrder = a[14];
    scratch = a[15];
  }
};

constexpr int64_t kTilesPerWord = 16;
} // namespace

llvm::SmallVector<Type> preprocess::tilePhaseArgTypes(OpBuilder &b) {
  Type i32 = b.getI32Type();
  Type buffer = MemRefType::get({ShapedType::kDynamic}, i32);
  llvm::SmallVector<Type> types = {b.getIndexType(), i32, i32};
  types.append(13, buffer);
  return types;
}

/// Creates the item function `name` and fills its body with `body`.
template <typename Body>
static func::FuncOp itemFunction(OpBuilder &b, Location loc, llvm::StringRef name,
                                 Body body) {
  auto fn = func::FuncOp::create(
      b, loc, name, b.getFunctionType(preprocess::tilePhaseArgTypes(b), {}));
  fn.setPrivate();
  OpBuilder::InsertionGuard guard(b);
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  ScfEmitter e(b, loc);
  TileArgs args(entry);
  body(e, args);
  func::ReturnOp::create(b, loc);
  return fn;
}

llvm::SmallVector<func::FuncOp>
preprocess::buildTilePhases(OpBuilder &b, Location loc, llvm::StringRef prefix,
                        int64_t tq, int64_t tk, int64_t numSlots) {
  llvm::SmallVector<func::FuncOp> items;
  Type i64 = b.getI64Type();

  // seqs: q-tile bases, the sequence of every q tile, NQT.
  items.push_back(itemFunction(b, loc, (prefix + "_seqs_item").str(),
                               [&](ScfEmitter &e, TileArgs &a) {
    Value numSeqs = e.fromI32(a.numSeqs);
    auto total = e.loop(e.c(0), numSeqs, {e.c(0)}, [&](Value seq, auto carried) {
      Value g = carried[0];
      e.store(g, a.qTileBase, seq);
      Value qLen = e.sub(e.load(a.cuQ, e.add(seq, e.c(1))), e.load(a.cuQ, seq));
      Value nq = e.ceilDivPos(qLen, tq);
      e.forEach(e.c(0), nq, [&](Value t) { e.store(seq, a.qTileSeq, e.add(g, t)); });
      return llvm::SmallVector<Value>{e.add(g, nq)};
    });
    e.store(total[0], a.qTileBase, numSeqs);
    e.store(total[0], a.counts, e.c(0));
  }));

  // tiles: states, slot ranges and entry words of 16 k tiles of one q tile.
  items.push_back(itemFunction(b, loc, (prefix + "_tiles_item").str(),
                               [&](ScfEmitter &e, TileArgs &a) {
    Value words = e.fromI32(a.nktWords);
    Value item = e.fromIndex(a.item);
    Value g = arith::DivSIOp::create(b, loc, item, words);
    Value w = arith::RemSIOp::create(b, loc, item, words);
    e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
      Value seq = e.load(a.qTileSeq, g);
      Value next = e.add(seq, e.c(1));
      Value qStart = e.load(a.cuQ, seq);
      Value qLen = e.sub(e.load(a.cuQ, next), qStart);
      Value kLen = e.sub(e.load(a.cuK, next), e.load(a.cuK, seq));
      Value q0 = e.mul(e.sub(g, e.load(a.qTileBase, seq)), e.c(tq));
      Value rows = e.min(e.c(tq), e.sub(qLen, q0));
      Value rowBase = e.add(qStart, q0);
      Value kt0 = e.mul(w, e.c(kTilesPerWord));
      Value ktLast = e.add(kt0, e.c(kTilesPerWord - 1));

      // Per tile of the word: touched?, rows covering it, min/max slot.
      auto local = MemRefType::get({4 * kTilesPerWord}, i64);
      Value acc = memref::AllocaOp::create(b, loc, local);
      auto at = [&](int64_t field, Value x) {
        return e.toIndex(e.add(e.c(field * kTilesPerWord), x));
      };
      auto get = [&](int64_t field, Value x) {
        return memref::LoadOp::create(b, loc, acc, ValueRange{at(field, x)})
            .getResult();
      };
      auto set = [&](int64_t field, Value x, Value v) {
        memref::StoreOp::create(b, loc, v, acc, ValueRange{at(field, x)});
      };
      enum { Touched, Full, KMin, KMax };
      e.forEach(e.c(0), e.c(kTilesPerWord), [&](Value x) {
        set(Touched, x, e.c(0));
        set(Full, x, e.c(0));
        set(KMin, x, e.c(numSlots));
        set(KMax, x, e.c(-1));
      });

      e.forEach(e.c(0), rows, [&](Value r) {
        Value row = e.add(rowBase, r);
        Value base = e.mul(row, e.c(2 * numSlots));
        e.forEach(e.c(0), e.c(numSlots), [&](Value k) {
          Value lo = e.load(a.intervals, e.add(base, e.mul(k, e.c(2))));
          Value hi = e.load(a.intervals, e.add(base, e.add(e.mul(k, e.c(2)), e.c(1))));
          // A slot touches tiles lo/TK .. (hi-1)/TK.
          e.ifThen(e.lt(lo, hi), [&] {
            Value first = e.max(e.divPos(lo, tk), kt0);
            Value last = e.min(e.divPos(e.sub(hi, e.c(1)), tk), ktLast);
            e.forEach(first, e.add(last, e.c(1)), [&](Value t) {
              Value x = e.sub(t, kt0);
              set(Touched, x, e.c(1));
              set(KMin, x, e.min(get(KMin, x), k));
              set(KMax, x, e.max(get(KMax, x), k));
            });
          });
          // A merged interval [m0, m1) covers the in-bounds part of tiles
          // ceil(m0/TK) .. (m1 == k_len ? (k_len-1)/TK : m1/TK - 1).
          Value m0 = e.load(a.merged, e.add(base, e.mul(k, e.c(2))));
          Value m1 = e.load(a.merged, e.add(base, e.add(e.mul(k, e.c(2)), e.c(1))));
          e.ifThen(e.lt(m0, m1), [&] {
            Value first = e.max(e.ceilDivPos(m0, tk), kt0);
            Value lastCovered =
                e.select(e.le(kLen, m1), e.divPos(e.sub(kLen, e.c(1)), tk),
                         e.sub(e.divPos(m1, tk), e.c(1)));
            Value last = e.min(lastCovered, ktLast);
            e.forEach(first, e.add(last, e.c(1)), [&](Value t) {
              Value x = e.sub(t, kt0);
              set(Full, x, e.add(get(Full, x), e.c(1)));
            });
          });
        });
      });

      // States (0 empty, 1 partial, 2 full) and entry words.
      Value nkt = e.ceilDivPos(kLen, tk);
      Value stride = e.mul(words, e.c(kTilesPerWord));
      auto word = e.loop(e.c(0), e.c(kTilesPerWord), {e.c(0)}, [&](Value x, auto carried) {
        Value t = e.add(kt0, x);
        Value touched = e.bitAnd(e.lt(t, nkt), e.ne(get(Touched, x), e.c(0)));
        Value full = e.eq(get(Full, x), rows);
        Value state = e.select(touched, e.select(full, e.c(2), e.c(1)), e.c(0));
        Value kmin = get(KMin, x);
        Value count = e.sub(e.add(get(KMax, x), e.c(1)), kmin);
        Value entry = e.bitOr(e.bitOr(t, e.shl(state, 16)),
                              e.bitOr(e.shl(kmin, 18), e.shl(count, 25)));
        e.store(e.select(touched, entry, e.c(0)), a.tileInfo,
                e.add(e.mul(g, stride), t));
        Value shift = arith::ShLIOp::create(b, loc, state, e.mul(x, e.c(2)));
        return llvm::SmallVector<Value>{e.bitOr(carried[0], shift)};
      });
      e.store(word[0], a.tileState, e.add(e.mul(g, words), w));
    });
  }));

  // count: non-empty tiles of one q tile.
  items.push_back(itemFunction(b, loc, (prefix + "_count_item").str(),
                               [&](ScfEmitter &e, TileArgs &a) {
    Value g = e.fromIndex(a.item);
    e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
      Value stride = e.mul(e.fromI32(a.nktWords), e.c(kTilesPerWord));
      Value base = e.mul(g, stride);
      auto n = e.loop(e.c(0), stride, {e.c(0)}, [&](Value t, auto carried) {
        Value nonEmpty = e.ne(e.load(a.tileInfo, e.add(base, t)), e.c(0));
        return llvm::SmallVector<Value>{e.add(carried[0], e.toI64(nonEmpty))};
      });
      e.store(n[0], a.counts, e.add(g, e.c(1)));
    });
  }));

  // scan: CSR offsets, and q tiles ordered by descending count (a stable
  // counting sort; scratch holds the histogram, then the next position).
  items.push_back(itemFunction(b, loc, (prefix + "_scan_item").str(),
                               [&](ScfEmitter &e, TileArgs &a) {
    Value nqt = e.load(a.counts, e.c(0));
    Value maxCount = e.mul(e.fromI32(a.nktWords), e.c(kTilesPerWord));
    auto count = [&](Value g) { return e.load(a.counts, e.add(g, e.c(1))); };
    auto end = e.loop(e.c(0), nqt, {e.c(0)}, [&](Value g, auto carried) {
      e.store(carried[0], a.tileOffsets, g);
      return llvm::SmallVector<Value>{e.add(carried[0], count(g))};
    });
    e.store(end[0], a.tileOffsets, nqt);
    Value buckets = e.add(maxCount, e.c(1));
    e.forEach(e.c(0), buckets, [&](Value c) { e.store(e.c(0), a.scratch, c); });
    e.forEach(e.c(0), nqt, [&](Value g) {
      Value c = count(g);
      e.store(e.add(e.load(a.scratch, c), e.c(1)), a.scratch, c);
    });
    // Heaviest first: bucket maxCount starts at 0.
    e.loop(e.c(0), buckets, {e.c(0)}, [&](Value x, auto carried) {
      Value c = e.sub(maxCount, x);
      Value size = e.load(a.scratch, c);
      e.store(carried[0], a.scratch, c);
      return llvm::SmallVector<Value>{e.add(carried[0], size)};
    });
    e.forEach(e.c(0), nqt, [&](Value g) {
      Value c = count(g);
      Value pos = e.load(a.scratch, c);
      e.store(g, a.tileOrder, pos);
      e.store(e.add(pos, e.c(1)), a.scratch, c);
    });
  }));

  // fill: the entries of one q tile.
  items.push_back(itemFunction(b, loc, (prefix + "_fill_item").str(),
                               [&](ScfEmitter &e, TileArgs &a) {
    Value g = e.fromIndex(a.item);
    e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
      Value stride = e.mul(e.fromI32(a.nktWords), e.c(kTilesPerWord));
      Value base = e.mul(g, stride);
      e.loop(e.c(0), stride, {e.load(a.tileOffsets, g)}, [&](Value t, auto carried) {
        Value info = e.load(a.tileInfo, e.add(base, t));
        Value nonEmpty = e.ne(info, e.c(0));
        e.ifThen(nonEmpty, [&] { e.store(info, a.tileEntries, carried[0]); });
        return llvm::SmallVector<Value>{e.add(carried[0], e.toI64(nonEmpty))};
      });
    });
  }));
  return items;
}
