//===- TilePhases.cpp - Tile states and tile lists of the descriptor ------===//
//
// The phases after the row phase (docs/descriptor.md), for one tile shape
// TQ x TK. Each is a function of one work item; all share one signature:
// (%item: index, then the tile group of cmask_runtime/KernelABI.h:
// num_seqs, nkt_words: i32; cu_seqlens_rows, cu_seqlens_cols, intervals,
// merged, q_tile_base [B+1], q_tile_seq [NQT], counts [1+NQT],
// tile_state [NQT*W], tile_info [NQT*W*16], tile_offsets [NQT+1],
// tile_entries [...], tile_order [NQT], envelopes [NQT*K*(8+8*ceil(TQ/16))],
// word_prefix [NQT*W], error [1]: memref<?xi32>), where W = nkt_words (16
// k tiles per state word) and NQT the number of global q tiles (counts[0],
// computed by the first phase).
//
//   seqs    (1 item)          q-tile bases and the sequence of every q tile
//   envinit (NQT*K items)     empty q-tile envelopes
//   env     (NQT*K*ceil(TQ/16) items)  per (q tile, slot index, 16 rows):
//                             the chunk's unions and intersections of the
//                             slots and merged slots; atomic min/max into
//                             the q-tile envelopes
//   tiles   (NQT*16W items)   one k tile: state, slot range, entry word,
//                             column windows
//   pack    (NQT*W items)     16 states per word
//   count   (NQT items)       non-empty and partial tiles, running count per
//                             word
//   scan    (NQT+1 items)     a q tile's CSR offset and its place in the
//                             order (descending count, ties by index)
//   fill    (NQT*16W items)   each non-empty tile's entry (and windows) at
//                             its position
//
//===----------------------------------------------------------------------===//

#include "PreprocessPhases.h"

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "Emitter.h"
#include "KernelSignature.h"

using namespace mlir;
using namespace mlir::cmask;
using namespace mlir::cmask::preprocess;

namespace {
namespace tile_group = ::cmask::abi::tile_group;

/// The arguments of a tile-phase item function, by name.
struct TileArgs {
  Value item, numSeqs, nktWords, cuQ, cuK, intervals, merged, qTileBase,
      qTileSeq, counts, tileState, tileInfo, tileOffsets, tileEntries,
      tileOrder, envelopes, wordPrefix, tileWindowInfo, tileWindows,
      partialCounts, error;

  explicit TileArgs(Block *body) {
    auto a = body->getArguments();
    // The item, then the tile group.
    auto group = [&](int index) { return a[1 + index]; };
    item = a[0];
    numSeqs = group(tile_group::NumSeqs);
    nktWords = group(tile_group::NktWords);
    cuQ = group(tile_group::CuSeqlensRows);
    cuK = group(tile_group::CuSeqlensCols);
    intervals = group(tile_group::Intervals);
    merged = group(tile_group::Merged);
    qTileBase = group(tile_group::QTileBase);
    qTileSeq = group(tile_group::QTileSeq);
    counts = group(tile_group::Counts);
    tileState = group(tile_group::TileState);
    tileInfo = group(tile_group::TileInfo);
    tileOffsets = group(tile_group::TileOffsets);
    tileEntries = group(tile_group::TileEntries);
    tileOrder = group(tile_group::TileOrder);
    envelopes = group(tile_group::Envelopes);
    wordPrefix = group(tile_group::WordPrefix);
    tileWindowInfo = group(tile_group::TileWindowInfo);
    tileWindows = group(tile_group::TileWindows);
    partialCounts = group(tile_group::PartialCounts);
    error = group(tile_group::Error);
  }
};

constexpr int64_t kTilesPerWord = ::cmask::abi::kTilesPerStateWord;
/// Up to this many slots per row, the tiles phase unrolls its slot loop.
constexpr int64_t kUnrollSlots = 8;
} // namespace

llvm::SmallVector<Type> preprocess::tilePhaseArgTypes(OpBuilder &b) {
  llvm::SmallVector<Type> types = {b.getIndexType()};
  types.append(getABITypes(b, ::cmask::abi::toList(tile_group::kSignature)));
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
  Emitter e(b, loc);
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
      b, loc, (prefix + "_seqs_item").str(), [&](Emitter &e, TileArgs &a) {
        Value numSeqs = e.sext64(a.numSeqs);
        Value capacity = e.bufferSize(a.qTileSeq); // never write past it
        Value maxKLen =
            e.mul(e.mul(e.sext64(a.nktWords), e.c64(kTilesPerWord)), e.c64(tk));
        // Flag 8: a sequence longer than the descriptor was sized for (its q
        // tiles past the capacity, or its k tiles past 16 W, are left out).
        auto total = e.loop(
            e.c64(0), numSeqs, {e.c64(0), e.c64(0)},
            [&](Value seq, auto carried) {
              Value g = carried[0];
              Value next = e.add(seq, e.c64(1));
              e.storeBuffer(g, a.qTileBase, seq);
              Value qLen =
                  e.sub(e.loadBuffer(a.cuQ, next), e.loadBuffer(a.cuQ, seq));
              Value kLen =
                  e.sub(e.loadBuffer(a.cuK, next), e.loadBuffer(a.cuK, seq));
              Value want = e.ceilDivPos(e.maxs(qLen, e.c64(0)), tq);
              Value nq = e.clamp(want, e.c64(0), e.sub(capacity, g));
              e.forEach(e.c64(0), nq, [&](Value t) {
                e.storeBuffer(seq, a.qTileSeq, e.add(g, t));
              });
              Value tooLong = e.bitOr(e.lt(nq, want), e.lt(maxKLen, kLen));
              return llvm::SmallVector<Value>{
                  e.add(g, nq), e.select(tooLong, e.c64(8), carried[1])};
            });
        e.storeBuffer(total[0], a.qTileBase, numSeqs);
        e.storeBuffer(total[0], a.counts, e.c64(0));
        e.ifThen(e.ne(total[1], e.c64(0)), [&] {
          memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::ori,
                                      e.trunc32(total[1]), a.error,
                                      ValueRange{e.toIndex(e.c64(0))});
        });
      }));

  // Shared by env and tiles: the q tile's sequence, rows and lengths.
  struct QTile {
    Value qLen, kLen, rows, rowBase;
  };
  auto qTile = [&](Emitter &e, TileArgs &a, Value g) {
    Value seq = e.loadBuffer(a.qTileSeq, g);
    Value next = e.add(seq, e.c64(1));
    Value qStart = e.loadBuffer(a.cuQ, seq);
    QTile t;
    t.qLen = e.sub(e.loadBuffer(a.cuQ, next), qStart);
    t.kLen = e.sub(e.loadBuffer(a.cuK, next), e.loadBuffer(a.cuK, seq));
    Value q0 = e.mul(e.sub(g, e.loadBuffer(a.qTileBase, seq)), e.c64(tq));
    // Rows within the interval table even for inconsistent cu_seqlens.
    Value tableRows =
        e.divPos(e.bufferSize(a.intervals), 2 * std::max<int64_t>(numSlots, 1));
    t.rowBase = e.clamp(e.add(qStart, q0), e.c64(0), tableRows);
    t.rows = e.clamp(e.mins(e.c64(tq), e.sub(t.qLen, q0)), e.c64(0),
                     e.sub(tableRows, t.rowBase));
    return t;
  };
  auto slotAt = [&](Emitter &e, Value table, Value row, Value k) {
    Value at = e.add(e.mul(row, e.c64(2 * numSlots)), e.mul(k, e.c64(2)));
    return std::make_pair(e.loadBuffer(table, at),
                          e.loadBuffer(table, e.add(at, e.c64(1))));
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
  int64_t envWords =
      ::cmask::abi::envelopeWords(tq); // per (q tile, slot index)
  assert(envWords == 8 + 8 * chunks && "envelope layout");
  auto envBase = [&](Emitter &e, Value g, Value k) {
    return e.mul(e.add(e.mul(g, e.c64(numSlots)), k), e.c64(envWords));
  };
  constexpr int64_t kBig = INT32_MAX, kSmall = INT32_MIN;

  // envinit: the identities of the q-tile envelopes' atomic min/max, for
  // every (q tile, slot index) the descriptor has room for (it runs beside
  // seqs: it may not read NQT).
  items.push_back(itemFunction(
      b, loc, (prefix + "_envinit_item").str(), [&](Emitter &e, TileArgs &a) {
        Value item = e.fromIndex(a.item);
        Value base = e.mul(item, e.c64(envWords));
        e.ifThen(
            e.le(e.add(base, e.c64(envWords)), e.bufferSize(a.envelopes)), [&] {
              for (int f = 0; f < 8; ++f) // min, max, max, min, ...
                e.storeBuffer(e.c64(f % 4 == 0 || f % 4 == 3 ? kBig : kSmall),
                              a.envelopes, e.add(base, e.c64(f)));
            });
      }));

  // env: per (q tile, slot index, chunk of 16 rows): the chunk's unions and
  // intersections (stored), folded into the q tile's with atomic min/max
  // (an empty chunk intersection makes the q tile's empty).
  items.push_back(itemFunction(
      b, loc, (prefix + "_env_item").str(), [&](Emitter &e, TileArgs &a) {
        Value item = e.fromIndex(a.item);
        Value chunk = e.rems(item, e.c64(chunks));
        Value gk = e.divPos(item, chunks);
        Value g = e.divPos(gk, kk);
        Value k = e.rems(gk, e.c64(kk));
        Value base = envBase(e, g, k);
        e.ifThen(e.bitAnd(e.lt(g, e.loadBuffer(a.counts, e.c64(0))),
                          e.le(e.add(base, e.c64(envWords)),
                               e.bufferSize(a.envelopes))),
                 [&] {
                   QTile t = qTile(e, a, g);
                   Value r0 = e.mul(chunk, e.c64(kEnvRows));
                   Value r1 = e.mins(e.add(r0, e.c64(kEnvRows)), t.rows);
                   Value big = e.c64(kBig), small = e.c64(kSmall);
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
                             e.select(valid, e.mins(acc[0], lo), acc[0]),
                             e.select(valid, e.maxs(acc[1], hi), acc[1]),
                             e.select(valid, e.maxs(acc[2], lo), big),
                             e.select(valid, e.mins(acc[3], hi), small),
                             e.select(mvalid, e.mins(acc[4], m0), acc[4]),
                             e.select(mvalid, e.maxs(acc[5], m1), acc[5]),
                             e.select(mvalid, e.maxs(acc[6], m0), big),
                             e.select(mvalid, e.mins(acc[7], m1), small)};
                       });
                   // A chunk without rows has empty intersections.
                   Value none = e.le(r1, r0);
                   Value at =
                       e.add(base, e.add(e.c64(8), e.mul(chunk, e.c64(8))));
                   for (int f = 0; f < 8; ++f) {
                     Value v = env[f];
                     if (f == 2 || f == 6)
                       v = e.select(none, big, v);
                     if (f == 3 || f == 7)
                       v = e.select(none, small, v);
                     e.storeBuffer(v, a.envelopes, e.add(at, e.c64(f)));
                     // A chunk without rows leaves the q tile's intersection
                     // alone.
                     bool isMin = f % 4 == 0 || f % 4 == 3;
                     if (f % 4 >= 2)
                       v = e.select(none, isMin ? big : small, v);
                     memref::AtomicRMWOp::create(
                         b, loc,
                         isMin ? arith::AtomicRMWKind::mins
                               : arith::AtomicRMWKind::maxs,
                         e.trunc32(v), a.envelopes,
                         ValueRange{e.toIndex(e.add(base, e.c64(f)))});
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
      b, loc, (prefix + "_tiles_item").str(), [&](Emitter &e, TileArgs &a) {
        Value stride = e.mul(e.sext64(a.nktWords), e.c64(kTilesPerWord));
        Value item = e.fromIndex(a.item);
        Value g = e.divs(item, stride);
        Value kt = e.rems(item, stride);
        e.ifThen(e.lt(g, e.loadBuffer(a.counts, e.c64(0))), [&] {
          QTile t = qTile(e, a, g);
          Value c0 = e.mul(kt, e.c64(tk));
          Value c1 = e.mins(e.add(c0, e.c64(tk)), t.kLen);
          Value inBounds = e.lt(c0, t.kLen);
          auto pairAt = [&](Value at) {
            return std::make_pair(
                e.loadBuffer(a.envelopes, at),
                e.loadBuffer(a.envelopes, e.add(at, e.c64(1))));
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
            return e.loop(r0, r1, {e.c64(0)}, [&](Value r, auto h) {
              auto [lo, hi] = slotAt(e, table, e.add(t.rowBase, r), k);
              Value m = e.bitAnd(e.lt(lo, hi),
                                 cover ? covers({lo, hi}) : meets({lo, hi}));
              return llvm::SmallVector<Value>{e.add(h[0], e.zext64(m))};
            })[0];
          };
          auto chunkRows = [&](Value c) {
            Value r0 = e.mul(c, e.c64(kEnvRows));
            return std::make_pair(
                r0, e.maxs(r0, e.mins(e.add(r0, e.c64(kEnvRows)), t.rows)));
          };
          // Every row's slot (or merged slot) meets (covers) the tile: the
          // intersection at `at` is not empty and does.
          auto every = [&](Value at, bool cover) {
            auto all = pairAt(at);
            return e.bitAnd(
                e.bitAnd(e.lt(all.first, all.second), e.lt(e.c64(0), t.rows)),
                cover ? covers(all) : meets(all));
          };
          // The q tile's 8 envelope words of slot index k (unions and
          // intersections of the slots, then of the merged slots).
          auto qEnvelope = [&](Value k) {
            Value base = envBase(e, g, k);
            llvm::SmallVector<Value> words;
            for (int f = 0; f < 8; ++f)
              words.push_back(e.loadBuffer(a.envelopes, e.add(base, e.c64(f))));
            return words;
          };
          auto nonEmpty = [&](Value lo, Value hi) {
            return e.bitAnd(e.lt(lo, hi), e.lt(e.c64(0), t.rows));
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
                      e.c64(0), e.c64(chunks), {e.c64(0)},
                      [&](Value c, auto h) {
                        Value at =
                            e.add(base, e.add(e.c64(8), e.mul(c, e.c64(8))));
                        Value all = every(e.add(at, e.c64(2)), false);
                        Value some = meets(pairAt(at));
                        Value n = e.ifElse(
                            e.bitAnd(some, e.bitNot(all)), {i64},
                            [&] {
                              auto [r0, r1] = chunkRows(c);
                              return llvm::SmallVector<Value>{
                                  anyRow(a.intervals, k, r0, r1, false)};
                            },
                            [&] {
                              return llvm::SmallVector<Value>{e.zext64(all)};
                            })[0];
                        return llvm::SmallVector<Value>{e.add(h[0], n)};
                      })[0];
                  Value hit = e.ne(hits, e.c64(0));
                  return llvm::SmallVector<Value>{
                      e.select(hit, e.mins(in[0], k), in[0]),
                      e.select(hit, e.maxs(in[1], k), in[1])};
                },
                [&] {
                  return llvm::SmallVector<Value>{
                      e.select(surely, e.mins(in[0], k), in[0]),
                      e.select(surely, e.maxs(in[1], k), in[1])};
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
                  return e.loop(
                      e.c64(0), e.c64(chunks), {n}, [&](Value c, auto m) {
                        Value at =
                            e.add(base, e.add(e.c64(8), e.mul(c, e.c64(8))));
                        Value all = every(e.add(at, e.c64(6)), true);
                        Value some = covers(pairAt(e.add(at, e.c64(4))));
                        auto [r0, r1] = chunkRows(c);
                        Value add = e.ifElse(
                            e.bitAnd(some, e.bitNot(all)), {i64},
                            [&] {
                              return llvm::SmallVector<Value>{
                                  anyRow(a.merged, k, r0, r1, true)};
                            },
                            [&] {
                              return llvm::SmallVector<Value>{
                                  e.select(all, e.sub(r1, r0), e.c64(0))};
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
          llvm::SmallVector<Value> range = {e.c64(numSlots), e.c64(-1)};
          llvm::SmallVector<llvm::SmallVector<Value>> envelopes;
          if (numSlots <= kUnrollSlots) {
            for (int64_t k = 0; k < numSlots; ++k)
              envelopes.push_back(qEnvelope(e.c64(k)));
            for (int64_t k = 0; k < numSlots; ++k)
              range = rangeStep(e.c64(k), envelopes[k], range);
          } else {
            range =
                e.loop(e.c64(0), e.c64(numSlots), range, [&](Value k, auto in) {
                  return rangeStep(k, qEnvelope(k), in);
                });
          }
          Value touchedAny = e.le(range[0], range[1]);
          Value covered = e.ifElse(
              touchedAny, {i64},
              [&] {
                if (numSlots <= kUnrollSlots) {
                  Value n = e.c64(0);
                  for (int64_t k = 0; k < numSlots; ++k)
                    n = coverStep(e.c64(k), envelopes[k], n);
                  return llvm::SmallVector<Value>{n};
                }
                return e.loop(e.c64(0), e.c64(numSlots), {e.c64(0)},
                              [&](Value k, auto n) {
                                return llvm::SmallVector<Value>{
                                    coverStep(k, qEnvelope(k), n[0])};
                              });
              },
              [&] { return llvm::SmallVector<Value>{e.c64(0)}; })[0];
          Value state = e.select(
              touchedAny, e.select(e.eq(covered, t.rows), e.c64(2), e.c64(1)),
              e.c64(0));
          Value count = e.sub(e.add(range[1], e.c64(1)), range[0]);
          Value entry = e.encodeEntry(kt, state, range[0], count);
          e.storeBuffer(e.select(touchedAny, entry, e.c64(0)), a.tileInfo,
                        item);
          // The column windows (DescriptorLayout.h, TileWindow): per group
          // of kWindowRows rows, the hull of its chunks' unions of the slots
          // in the range that meet the tile, clipped to it.
          Value windows = e.c64(0);
          if (tk <= ::cmask::abi::kMaxWindowColumns) {
            int64_t perGroup = ::cmask::abi::kWindowRows / kEnvRows;
            int64_t groups =
                std::min<int64_t>(::cmask::abi::kWindowGroups,
                                  (chunks + perGroup - 1) / perGroup);
            llvm::SmallVector<Value> init;
            for (int64_t w = 0; w < groups; ++w)
              init.append({e.c64(kBig), e.c64(kSmall)});
            llvm::SmallVector<Value> hull = e.loop(
                e.maxs(range[0], e.c64(0)),
                e.select(touchedAny, e.add(range[1], e.c64(1)), e.c64(0)), init,
                [&](Value k, auto in) {
                  Value base = envBase(e, g, k);
                  llvm::SmallVector<Value> out(in.begin(), in.end());
                  for (int64_t w = 0; w < groups; ++w)
                    for (int64_t c = w * perGroup;
                         c < std::min(chunks, (w + 1) * perGroup); ++c) {
                      auto u = pairAt(
                          e.add(base, e.c64(8 + 8 * c))); // the chunk's union
                      Value hit = e.bitAnd(e.lt(u.first, u.second), meets(u));
                      out[2 * w] =
                          e.select(hit, e.mins(out[2 * w], e.maxs(u.first, c0)),
                                   out[2 * w]);
                      out[2 * w + 1] = e.select(
                          hit, e.maxs(out[2 * w + 1], e.mins(u.second, c1)),
                          out[2 * w + 1]);
                    }
                  return out;
                });
            for (int64_t w = 0; w < groups; ++w) {
              Value lo = hull[2 * w], hi = hull[2 * w + 1];
              Value none = e.le(hi, lo);
              lo = e.select(none, e.c64(0), e.sub(lo, c0));
              hi = e.select(none, e.c64(0), e.sub(hi, c0));
              unsigned shift = ::cmask::abi::windowShift(w);
              windows = e.bitOr(
                  windows,
                  e.bitOr(e.shl(lo, e.c64(shift)),
                          e.shl(hi, e.c64(shift +
                                          ::cmask::abi::kWindowBoundBits))));
            }
          }
          e.storeBuffer(windows, a.tileWindowInfo, item);
        });
      }));

  auto stateOf = [&](Emitter &e, Value info) {
    return e.entryField(info, ::cmask::abi::kEntryState);
  };

  // pack: the 2-bit states of 16 k tiles into one word.
  items.push_back(itemFunction(
      b, loc, (prefix + "_pack_item").str(), [&](Emitter &e, TileArgs &a) {
        Value words = e.sext64(a.nktWords);
        Value item = e.fromIndex(a.item);
        Value g = e.divs(item, words);
        e.ifThen(e.lt(g, e.loadBuffer(a.counts, e.c64(0))), [&] {
          Value base = e.mul(item, e.c64(kTilesPerWord));
          Value word = e.c64(0);
          for (int64_t x = 0; x < kTilesPerWord; ++x)
            word = e.bitOr(
                word, e.shl(stateOf(e, e.loadBuffer(a.tileInfo,
                                                    e.add(base, e.c64(x)))),
                            e.c64(2 * x)));
          e.storeBuffer(word, a.tileState, item);
        });
      }));

  // The fields of a state word below `upto` that are not empty (or, with
  // `partial`, that are partial).
  auto nonEmptyBelow = [&](Emitter &e, Value word, int64_t upto,
                           bool partial = false) {
    Value sum = e.c64(0);
    for (int64_t x = 0; x < upto; ++x) {
      Value field = e.bitAnd(e.shr(word, e.c64(2 * x)), e.c64(3));
      sum = e.add(sum, e.zext64(partial ? e.eq(field, e.c64(1))
                                        : e.ne(field, e.c64(0))));
    }
    return sum;
  };

  // count: non-empty tiles of one q tile, and the running count before each
  // of its state words (wordPrefix), from the state words; its partial
  // tiles (partial_counts).
  items.push_back(itemFunction(
      b, loc, (prefix + "_count_item").str(), [&](Emitter &e, TileArgs &a) {
        Value g = e.fromIndex(a.item);
        e.ifThen(e.lt(g, e.loadBuffer(a.counts, e.c64(0))), [&] {
          Value words = e.sext64(a.nktWords);
          auto n = e.loop(
              e.c64(0), words, {e.c64(0), e.c64(0)},
              [&](Value w, auto carried) {
                Value at = e.add(e.mul(g, words), w);
                e.storeBuffer(carried[0], a.wordPrefix, at);
                Value word = e.loadBuffer(a.tileState, at);
                return llvm::SmallVector<Value>{
                    e.add(carried[0], nonEmptyBelow(e, word, kTilesPerWord)),
                    e.add(carried[1],
                          nonEmptyBelow(e, word, kTilesPerWord, true))};
              });
          e.storeBuffer(n[0], a.counts, e.add(g, e.c64(1)));
          e.storeBuffer(n[1], a.partialCounts, g);
        });
      }));

  // scan: one q tile per item (and one more for the total): its CSR offset
  // (the counts before it) and its place in the order, heaviest first, ties
  // by index: the number of q tiles that precede it in that order. Each
  // item reads all counts (independent loads); no item depends on another.
  items.push_back(itemFunction(
      b, loc, (prefix + "_scan_item").str(), [&](Emitter &e, TileArgs &a) {
        Value g = e.fromIndex(a.item);
        Value nqt = e.loadBuffer(a.counts, e.c64(0));
        auto count = [&](Value x) {
          return e.loadBuffer(a.counts, e.add(x, e.c64(1)));
        };
        e.ifThen(e.le(g, nqt), [&] {
          Value before =
              e.loop(e.c64(0), g, {e.c64(0)}, [&](Value x, auto sum) {
                return llvm::SmallVector<Value>{e.add(sum[0], count(x))};
              })[0];
          e.storeBuffer(before, a.tileOffsets, g);
          e.ifThen(e.lt(g, nqt), [&] {
            Value mine = count(g);
            Value rank =
                e.loop(e.c64(0), nqt, {e.c64(0)}, [&](Value x, auto r) {
                  Value cx = count(x);
                  Value precedes = e.bitOr(
                      e.lt(mine, cx), e.bitAnd(e.eq(cx, mine), e.lt(x, g)));
                  return llvm::SmallVector<Value>{
                      e.add(r[0], e.zext64(precedes))};
                })[0];
            e.storeBuffer(g, a.tileOrder, rank);
          });
        });
      }));

  // fill: one k tile: its entry goes to offsets[g] + the non-empty tiles
  // before it in its q tile (wordPrefix + those below it in its word).
  items.push_back(itemFunction(
      b, loc, (prefix + "_fill_item").str(), [&](Emitter &e, TileArgs &a) {
        Value words = e.sext64(a.nktWords);
        Value stride = e.mul(words, e.c64(kTilesPerWord));
        Value item = e.fromIndex(a.item);
        Value g = e.divs(item, stride);
        Value kt = e.rems(item, stride);
        e.ifThen(e.lt(g, e.loadBuffer(a.counts, e.c64(0))), [&] {
          Value info = e.loadBuffer(a.tileInfo, item);
          e.ifThen(e.ne(info, e.c64(0)), [&] {
            Value w = e.divPos(kt, kTilesPerWord);
            Value x = e.rems(kt, e.c64(kTilesPerWord));
            Value at = e.add(e.mul(g, words), w);
            Value word = e.loadBuffer(a.tileState, at);
            // Non-empty fields below x: mask the word to its low 2x bits.
            Value mask = e.sub(e.shl(e.c64(1), e.mul(x, e.c64(2))), e.c64(1));
            Value below = nonEmptyBelow(e, e.bitAnd(word, mask), kTilesPerWord);
            Value pos = e.add(e.add(e.loadBuffer(a.tileOffsets, g),
                                    e.loadBuffer(a.wordPrefix, at)),
                              below);
            e.storeBuffer(info, a.tileEntries, pos);
            e.storeBuffer(e.loadBuffer(a.tileWindowInfo, item), a.tileWindows,
                          pos);
          });
        });
      }));

  return items;
}
