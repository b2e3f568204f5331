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
//    %envelopes [NQT*K*(8+8*ceil(TQ/16))], %word_prefix [NQT*W], %error [1])
//                                               (all memref<?xi32>)
//
// where W = nkt_words (16 k tiles per state word) and NQT the number of
// global q tiles (counts[0], computed by the first phase).
//
//   seqs    (1 item)          q-tile bases and the sequence of every q tile
//   envinit (NQT*K items)     empty q-tile envelopes
//   env     (NQT*K*ceil(TQ/16) items)  per (q tile, slot index, 16 rows):
//                             the chunk's unions and intersections of the
//                             slots and merged slots; atomic min/max into
//                             the q-tile envelopes
//   tiles   (NQT*16W items)   one k tile: state, slot range, entry word
//   pack    (NQT*W items)     16 states per word
//   count   (NQT items)       non-empty tiles, running count per word
//   scan    (NQT+1 items)     a q tile's CSR offset and its place in the
//                             order (descending count, ties by index)
//   fill    (NQT*16W items)   each non-empty tile's entry at its position
//
//===----------------------------------------------------------------------===//

#include "PreprocessPhases.h"

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "ScfEmitter.h"

using namespace mlir;
using namespace mlir::cmask;
using namespace mlir::cmask::preprocess;

namespace {
/// The arguments of a tile-phase item function, by name.
struct TileArgs {
  Value item, numSeqs, nktWords, cuQ, cuK, intervals, merged, qTileBase,
      qTileSeq, counts, tileState, tileInfo, tileOffsets, tileEntries,
      tileOrder, envelopes, wordPrefix, error;

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
    envelopes = a[15];
    wordPrefix = a[16];
    error = a[17];
  }
};

constexpr int64_t kTilesPerWord = 16;
/// Up to this many slots per row, the tiles phase unrolls its slot loop.
constexpr int64_t kUnrollSlots = 8;
} // namespace

llvm::SmallVector<Type> preprocess::tilePhaseArgTypes(OpBuilder &b) {
  Type i32 = b.getI32Type();
  Type buffer = MemRefType::get({ShapedType::kDynamic}, i32);
  llvm::SmallVector<Type> types = {b.getIndexType(), i32, i32};
  types.append(15, buffer);
  return types;
}

/// Creates the item function `name` and fills its body with `body`.
template <typename Body>
static func::FuncOp itemFunction(OpBuilder &b, Location loc,
                                 llvm::StringRef name, Body body) {
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
  items.push_back(itemFunction(
      b, loc, (prefix + "_seqs_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value numSeqs = e.fromI32(a.numSeqs);
        Value capacity = e.dim(a.qTileSeq); // never write past it
        Value maxKLen =
            e.mul(e.mul(e.fromI32(a.nktWords), e.c(kTilesPerWord)), e.c(tk));
        // Flag 8: a sequence longer than the descriptor was sized for (its q
        // tiles past the capacity, or its k tiles past 16 W, are left out).
        auto total = e.loop(
            e.c(0), numSeqs, {e.c(0), e.c(0)}, [&](Value seq, auto carried) {
              Value g = carried[0];
              Value next = e.add(seq, e.c(1));
              e.store(g, a.qTileBase, seq);
              Value qLen = e.sub(e.load(a.cuQ, next), e.load(a.cuQ, seq));
              Value kLen = e.sub(e.load(a.cuK, next), e.load(a.cuK, seq));
              Value want = e.ceilDivPos(e.max(qLen, e.c(0)), tq);
              Value nq = e.clamp(want, e.c(0), e.sub(capacity, g));
              e.forEach(e.c(0), nq, [&](Value t) {
                e.store(seq, a.qTileSeq, e.add(g, t));
              });
              Value tooLong = e.bitOr(e.lt(nq, want), e.lt(maxKLen, kLen));
              return llvm::SmallVector<Value>{
                  e.add(g, nq), e.select(tooLong, e.c(8), carried[1])};
            });
        e.store(total[0], a.qTileBase, numSeqs);
        e.store(total[0], a.counts, e.c(0));
        e.ifThen(e.ne(total[1], e.c(0)), [&] {
          memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::ori,
                                      e.toI32(total[1]), a.error,
                                      ValueRange{e.toIndex(e.c(0))});
        });
      }));

  // Shared by env and tiles: the q tile's sequence, rows and lengths.
  struct QTile {
    Value qLen, kLen, rows, rowBase;
  };
  auto qTile = [&](ScfEmitter &e, TileArgs &a, Value g) {
    Value seq = e.load(a.qTileSeq, g);
    Value next = e.add(seq, e.c(1));
    Value qStart = e.load(a.cuQ, seq);
    QTile t;
    t.qLen = e.sub(e.load(a.cuQ, next), qStart);
    t.kLen = e.sub(e.load(a.cuK, next), e.load(a.cuK, seq));
    Value q0 = e.mul(e.sub(g, e.load(a.qTileBase, seq)), e.c(tq));
    // Rows within the interval table even for inconsistent cu_seqlens.
    Value tableRows =
        e.divPos(e.dim(a.intervals), 2 * std::max<int64_t>(numSlots, 1));
    t.rowBase = e.clamp(e.add(qStart, q0), e.c(0), tableRows);
    t.rows = e.clamp(e.min(e.c(tq), e.sub(t.qLen, q0)), e.c(0),
                     e.sub(tableRows, t.rowBase));
    return t;
  };
  auto slotAt = [&](ScfEmitter &e, Value table, Value row, Value k) {
    Value at = e.add(e.mul(row, e.c(2 * numSlots)), e.mul(k, e.c(2)));
    return std::make_pair(e.load(table, at), e.load(table, e.add(at, e.c(1))));
  };

  // Envelopes, per (q tile, slot index k), 8 words for the q tile then 8
  // per chunk of 16 rows: the union of the rows' slots k [min lo, max hi),
  // their intersection [max lo, min hi) (empty, as (INT32_MAX, INT32_MIN),
  // when one of the rows has no slot k), and the same two for the merged
  // slots k. The tiles phase decides most tiles from them without reading
  // rows.
  constexpr int64_t kEnvRows = 16;
  int64_t chunks = (tq + kEnvRows - 1) / kEnvRows;
  int64_t kk = std::max<int64_t>(numSlots, 1);
  int64_t envWords = getEnvelopeWords(tq); // per (q tile, slot index)
  assert(envWords == 8 + 8 * chunks && "envelope layout");
  auto envBase = [&](ScfEmitter &e, Value g, Value k) {
    return e.mul(e.add(e.mul(g, e.c(numSlots)), k), e.c(envWords));
  };
  constexpr int64_t kBig = INT32_MAX, kSmall = INT32_MIN;

  // envinit: the identities of the q-tile envelopes' atomic min/max, for
  // every (q tile, slot index) the descriptor has room for (it runs beside
  // seqs: it may not read NQT).
  items.push_back(itemFunction(
      b, loc, (prefix + "_envinit_item").str(),
      [&](ScfEmitter &e, TileArgs &a) {
        Value item = e.fromIndex(a.item);
        Value base = e.mul(item, e.c(envWords));
        e.ifThen(e.le(e.add(base, e.c(envWords)), e.dim(a.envelopes)), [&] {
          for (int f = 0; f < 8; ++f) // min, max, max, min, ...
            e.store(e.c(f % 4 == 0 || f % 4 == 3 ? kBig : kSmall), a.envelopes,
                    e.add(base, e.c(f)));
        });
      }));

  // env: per (q tile, slot index, chunk of 16 rows): the chunk's unions and
  // intersections (stored), folded into the q tile's with atomic min/max
  // (an empty chunk intersection makes the q tile's empty).
  items.push_back(itemFunction(
      b, loc, (prefix + "_env_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value item = e.fromIndex(a.item);
        Value chunk = arith::RemSIOp::create(b, loc, item, e.c(chunks));
        Value gk = e.divPos(item, chunks);
        Value g = e.divPos(gk, kk);
        Value k = arith::RemSIOp::create(b, loc, gk, e.c(kk));
        Value base = envBase(e, g, k);
        e.ifThen(e.bitAnd(e.lt(g, e.load(a.counts, e.c(0))),
                          e.le(e.add(base, e.c(envWords)), e.dim(a.envelopes))),
                 [&] {
                   QTile t = qTile(e, a, g);
                   Value r0 = e.mul(chunk, e.c(kEnvRows));
                   Value r1 = e.min(e.add(r0, e.c(kEnvRows)), t.rows);
                   Value big = e.c(kBig), small = e.c(kSmall);
                   // Unions and intersections of the slots and of the merged
                   // slots.
                   auto env = e.loop(
                       r0, r1, {big, small, small, big, big, small, small, big},
                       [&](Value r, auto acc) {
                         Value row = e.add(t.rowBase, r);
                         auto [lo, hi] = slotAt(e, a.intervals, row, k);
                         auto [m0, m1] = slotAt(e, a.merged, row, k);
                         Value valid = e.lt(lo, hi), mvalid = e.lt(m0, m1);
                         return llvm::SmallVector<Value>{
                             e.select(valid, e.min(acc[0], lo), acc[0]),
                             e.select(valid, e.max(acc[1], hi), acc[1]),
                             e.select(valid, e.max(acc[2], lo), big),
                             e.select(valid, e.min(acc[3], hi), small),
                             e.select(mvalid, e.min(acc[4], m0), acc[4]),
                             e.select(mvalid, e.max(acc[5], m1), acc[5]),
                             e.select(mvalid, e.max(acc[6], m0), big),
                             e.select(mvalid, e.min(acc[7], m1), small)};
                       });
                   // A chunk without rows has empty intersections.
                   Value none = e.le(r1, r0);
                   Value at = e.add(base, e.add(e.c(8), e.mul(chunk, e.c(8))));
                   for (int f = 0; f < 8; ++f) {
                     Value v = env[f];
                     if (f == 2 || f == 6)
                       v = e.select(none, big, v);
                     if (f == 3 || f == 7)
                       v = e.select(none, small, v);
                     e.store(v, a.envelopes, e.add(at, e.c(f)));
                     // A chunk without rows leaves the q tile's intersection
                     // alone.
                     bool isMin = f % 4 == 0 || f % 4 == 3;
                     if (f % 4 >= 2)
                       v = e.select(none, isMin ? big : small, v);
                     memref::AtomicRMWOp::create(
                         b, loc,
                         isMin ? arith::AtomicRMWKind::mins
                               : arith::AtomicRMWKind::maxs,
                         e.toI32(v), a.envelopes,
                         ValueRange{e.toIndex(e.add(base, e.c(f)))});
                   }
                 });
      }));

  // tiles: one k tile of one q tile: its state, slot range and entry word.
  // Touched when a slot of one of its rows meets it; full when every
  // in-bounds row's merged slots cover its in-bounds columns (merged slots
  // are disjoint, so one of them does). Slot indices whose envelope misses
  // the tile are skipped. The q tile, then each chunk, is decided by its
  // union (no row meets / covers) or its intersection (every row does); the
  // rows of a chunk are read only when neither decides.
  items.push_back(itemFunction(
      b, loc, (prefix + "_tiles_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value stride = e.mul(e.fromI32(a.nktWords), e.c(kTilesPerWord));
        Value item = e.fromIndex(a.item);
        Value g = arith::DivSIOp::create(b, loc, item, stride);
        Value kt = arith::RemSIOp::create(b, loc, item, stride);
        e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
          QTile t = qTile(e, a, g);
          Value c0 = e.mul(kt, e.c(tk));
          Value c1 = e.min(e.add(c0, e.c(tk)), t.kLen);
          Value inBounds = e.lt(c0, t.kLen);
          auto pairAt = [&](Value at) {
            return std::make_pair(e.load(a.envelopes, at),
                                  e.load(a.envelopes, e.add(at, e.c(1))));
          };
          auto meets = [&](std::pair<Value, Value> s) {
            return e.bitAnd(e.lt(s.first, c1), e.lt(c0, s.second));
          };
          auto covers = [&](std::pair<Value, Value> s) {
            return e.bitAnd(e.le(s.first, c0), e.le(c1, s.second));
          };
          // The rows [r0, r1) of the q tile, as a loop of plain loads.
          auto anyRow = [&](Value table, Value k, Value r0, Value r1,
                            bool cover) {
            return e.loop(r0, r1, {e.c(0)}, [&](Value r, auto h) {
              auto [lo, hi] = slotAt(e, table, e.add(t.rowBase, r), k);
              Value m = e.bitAnd(e.lt(lo, hi),
                                 cover ? covers({lo, hi}) : meets({lo, hi}));
              return llvm::SmallVector<Value>{e.add(h[0], e.toI64(m))};
            })[0];
          };
          auto chunkRows = [&](Value c) {
            Value r0 = e.mul(c, e.c(kEnvRows));
            return std::make_pair(
                r0, e.max(r0, e.min(e.add(r0, e.c(kEnvRows)), t.rows)));
          };
          // Every row's slot (or merged slot) meets (covers) the tile: the
          // intersection at `at` is not empty and does.
          auto every = [&](Value at, bool cover) {
            auto all = pairAt(at);
            return e.bitAnd(
                e.bitAnd(e.lt(all.first, all.second), e.lt(e.c(0), t.rows)),
                cover ? covers(all) : meets(all));
          };
          // The q tile's 8 envelope words of slot index k (unions and
          // intersections of the slots, then of the merged slots).
          auto qEnvelope = [&](Value k) {
            Value base = envBase(e, g, k);
            llvm::SmallVector<Value> words;
            for (int f = 0; f < 8; ++f)
              words.push_back(e.load(a.envelopes, e.add(base, e.c(f))));
            return words;
          };
          auto nonEmpty = [&](Value lo, Value hi) {
            return e.bitAnd(e.lt(lo, hi), e.lt(e.c(0), t.rows));
          };
          // Slot range, one slot index: the slots one of whose rows meets the
          // tile (`in` = [min, max] so far).
          auto rangeStep = [&](Value k, llvm::ArrayRef<Value> env,
                               llvm::ArrayRef<Value> in) {
            Value base = envBase(e, g, k);
            Value maybe = e.bitAnd(inBounds, meets({env[0], env[1]}));
            Value surely =
                e.bitAnd(inBounds, e.bitAnd(nonEmpty(env[2], env[3]),
                                            meets({env[2], env[3]})));
            return e.ifElse(
                e.bitAnd(maybe, e.bitNot(surely)), {i64, i64},
                [&] {
                  Value hits = e.loop(
                      e.c(0), e.c(chunks), {e.c(0)}, [&](Value c, auto h) {
                        Value at = e.add(base, e.add(e.c(8), e.mul(c, e.c(8))));
                        Value all = every(e.add(at, e.c(2)), false);
                        Value some = meets(pairAt(at));
                        Value n = e.ifElse(
                            e.bitAnd(some, e.bitNot(all)), {i64},
                            [&] {
                              auto [r0, r1] = chunkRows(c);
                              return llvm::SmallVector<Value>{
                                  anyRow(a.intervals, k, r0, r1, false)};
                            },
                            [&] {
                              return llvm::SmallVector<Value>{e.toI64(all)};
                            })[0];
                        return llvm::SmallVector<Value>{e.add(h[0], n)};
                      })[0];
                  Value hit = e.ne(hits, e.c(0));
                  return llvm::SmallVector<Value>{
                      e.select(hit, e.min(in[0], k), in[0]),
                      e.select(hit, e.max(in[1], k), in[1])};
                },
                [&] {
                  return llvm::SmallVector<Value>{
                      e.select(surely, e.min(in[0], k), in[0]),
                      e.select(surely, e.max(in[1], k), in[1])};
                });
          };
          // Rows covering the tile, one merged slot index (a merged slot
          // covering the tile for one row lies inside the envelope).
          auto coverStep = [&](Value k, llvm::ArrayRef<Value> env, Value n) {
            Value base = envBase(e, g, k);
            Value maybe = covers({env[4], env[5]});
            Value surely =
                e.bitAnd(nonEmpty(env[6], env[7]), covers({env[6], env[7]}));
            return e.ifElse(
                e.bitAnd(maybe, e.bitNot(surely)), {i64},
                [&] {
                  return e.loop(e.c(0), e.c(chunks), {n}, [&](Value c, auto m) {
                    Value at = e.add(base, e.add(e.c(8), e.mul(c, e.c(8))));
                    Value all = every(e.add(at, e.c(6)), true);
                    Value some = covers(pairAt(e.add(at, e.c(4))));
                    auto [r0, r1] = chunkRows(c);
                    Value add = e.ifElse(
                        e.bitAnd(some, e.bitNot(all)), {i64},
                        [&] {
                          return llvm::SmallVector<Value>{
                              anyRow(a.merged, k, r0, r1, true)};
                        },
                        [&] {
                          return llvm::SmallVector<Value>{
                              e.select(all, e.sub(r1, r0), e.c(0))};
                        })[0];
                    return llvm::SmallVector<Value>{e.add(m[0], add)};
                  });
                },
                [&] {
                  return llvm::SmallVector<Value>{
                      e.select(surely, e.add(n, t.rows), n)};
                })[0];
          };
          // Few slot indices: unrolled, their envelopes loaded together up
          // front (independent loads); otherwise a loop.
          llvm::SmallVector<Value> range = {e.c(numSlots), e.c(-1)};
          llvm::SmallVector<llvm::SmallVector<Value>> envelopes;
          if (numSlots <= kUnrollSlots) {
            for (int64_t k = 0; k < numSlots; ++k)
              envelopes.push_back(qEnvelope(e.c(k)));
            for (int64_t k = 0; k < numSlots; ++k)
              range = rangeStep(e.c(k), envelopes[k], range);
          } else {
            range = e.loop(e.c(0), e.c(numSlots), range, [&](Value k, auto in) {
              return rangeStep(k, qEnvelope(k), in);
            });
          }
          Value touchedAny = e.le(range[0], range[1]);
          Value covered = e.ifElse(
              touchedAny, {i64},
              [&] {
                if (numSlots <= kUnrollSlots) {
                  Value n = e.c(0);
                  for (int64_t k = 0; k < numSlots; ++k)
                    n = coverStep(e.c(k), envelopes[k], n);
                  return llvm::SmallVector<Value>{n};
                }
                return e.loop(e.c(0), e.c(numSlots), {e.c(0)},
                              [&](Value k, auto n) {
                                return llvm::SmallVector<Value>{
                                    coverStep(k, qEnvelope(k), n[0])};
                              });
              },
              [&] { return llvm::SmallVector<Value>{e.c(0)}; })[0];
          Value state =
              e.select(touchedAny,
                       e.select(e.eq(covered, t.rows), e.c(2), e.c(1)), e.c(0));
          Value count = e.sub(e.add(range[1], e.c(1)), range[0]);
          Value entry = e.bitOr(e.bitOr(kt, e.shl(state, 16)),
                                e.bitOr(e.shl(range[0], 18), e.shl(count, 25)));
          e.store(e.select(touchedAny, entry, e.c(0)), a.tileInfo, item);
        });
      }));

  auto stateOf = [&](ScfEmitter &e, Value info) {
    return e.bitAnd(arith::ShRUIOp::create(b, loc, info, e.c(16)), e.c(3));
  };

  // pack: the 2-bit states of 16 k tiles into one word.
  items.push_back(itemFunction(
      b, loc, (prefix + "_pack_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value words = e.fromI32(a.nktWords);
        Value item = e.fromIndex(a.item);
        Value g = arith::DivSIOp::create(b, loc, item, words);
        e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
          Value base = e.mul(item, e.c(kTilesPerWord));
          Value word = e.c(0);
          for (int64_t x = 0; x < kTilesPerWord; ++x)
            word = e.bitOr(
                word, e.shl(stateOf(e, e.load(a.tileInfo, e.add(base, e.c(x)))),
                            2 * x));
          e.store(word, a.tileState, item);
        });
      }));

  // Non-empty tiles among the first `x` of a state word.
  auto nonEmptyBelow = [&](ScfEmitter &e, Value word, int64_t upto) {
    Value sum = e.c(0);
    for (int64_t x = 0; x < upto; ++x) {
      Value field =
          e.bitAnd(arith::ShRUIOp::create(b, loc, word, e.c(2 * x)), e.c(3));
      sum = e.add(sum, e.toI64(e.ne(field, e.c(0))));
    }
    return sum;
  };

  // count: non-empty tiles of one q tile, and the running count before each
  // of its state words (wordPrefix), from the state words.
  items.push_back(itemFunction(
      b, loc, (prefix + "_count_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value g = e.fromIndex(a.item);
        e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
          Value words = e.fromI32(a.nktWords);
          auto n = e.loop(e.c(0), words, {e.c(0)}, [&](Value w, auto carried) {
            Value at = e.add(e.mul(g, words), w);
            e.store(carried[0], a.wordPrefix, at);
            Value word = e.load(a.tileState, at);
            return llvm::SmallVector<Value>{
                e.add(carried[0], nonEmptyBelow(e, word, kTilesPerWord))};
          });
          e.store(n[0], a.counts, e.add(g, e.c(1)));
        });
      }));

  // scan: one q tile per item (and one more for the total): its CSR offset
  // (the counts before it) and its place in the order, heaviest first, ties
  // by index: the number of q tiles that precede it in that order. Each
  // item reads all counts (independent loads); no item depends on another.
  items.push_back(itemFunction(
      b, loc, (prefix + "_scan_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value g = e.fromIndex(a.item);
        Value nqt = e.load(a.counts, e.c(0));
        auto count = [&](Value x) {
          return e.load(a.counts, e.add(x, e.c(1)));
        };
        e.ifThen(e.le(g, nqt), [&] {
          Value before = e.loop(e.c(0), g, {e.c(0)}, [&](Value x, auto sum) {
            return llvm::SmallVector<Value>{e.add(sum[0], count(x))};
          })[0];
          e.store(before, a.tileOffsets, g);
          e.ifThen(e.lt(g, nqt), [&] {
            Value mine = count(g);
            Value rank = e.loop(e.c(0), nqt, {e.c(0)}, [&](Value x, auto r) {
              Value cx = count(x);
              Value precedes =
                  e.bitOr(e.lt(mine, cx), e.bitAnd(e.eq(cx, mine), e.lt(x, g)));
              return llvm::SmallVector<Value>{e.add(r[0], e.toI64(precedes))};
            })[0];
            e.store(g, a.tileOrder, rank);
          });
        });
      }));

  // fill: one k tile: its entry goes to offsets[g] + the non-empty tiles
  // before it in its q tile (wordPrefix + those below it in its word).
  items.push_back(itemFunction(
      b, loc, (prefix + "_fill_item").str(), [&](ScfEmitter &e, TileArgs &a) {
        Value words = e.fromI32(a.nktWords);
        Value stride = e.mul(words, e.c(kTilesPerWord));
        Value item = e.fromIndex(a.item);
        Value g = arith::DivSIOp::create(b, loc, item, stride);
        Value kt = arith::RemSIOp::create(b, loc, item, stride);
        e.ifThen(e.lt(g, e.load(a.counts, e.c(0))), [&] {
          Value info = e.load(a.tileInfo, item);
          e.ifThen(e.ne(info, e.c(0)), [&] {
            Value w = e.divPos(kt, kTilesPerWord);
            Value x = arith::RemSIOp::create(b, loc, kt, e.c(kTilesPerWord));
            Value at = e.add(e.mul(g, words), w);
            Value word = e.load(a.tileState, at);
            // Non-empty fields below x: mask the word to its low 2x bits.
            Value mask =
                e.sub(arith::ShLIOp::create(b, loc, e.c(1), e.mul(x, e.c(2))),
                      e.c(1));
            Value below = nonEmptyBelow(e, e.bitAnd(word, mask), kTilesPerWord);
            Value pos =
                e.add(e.add(e.load(a.tileOffsets, g), e.load(a.wordPrefix, at)),
                      below);
            e.store(info, a.tileEntries, pos);
          });
        });
      }));

  return items;
}
