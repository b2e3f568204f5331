//===- DescriptorLayout.h - The Execution Descriptor's layout ---*- C++ -*-===//
//
// The one definition of the descriptor's encoding that the compiler (the
// preprocess and attention builders, the CPU twin, the JSON dumps), the
// runtime and its tools all read (docs/descriptor.md):
//   - the tile-list entry word: key tile | state << 16 | first slot << 18 |
//     slot count << 25, and the 2-bit tile states;
//   - the column-window word of an entry (two 64-row groups, 8-bit bounds);
//   - the sizes of one tile shape's buffers for a batch bound;
//   - how many work items each preprocess phase has.
//
// Header-only, C++17, no CUDA, LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_DESCRIPTORLAYOUT_H
#define CMASK_RUNTIME_DESCRIPTORLAYOUT_H

#include "cmask_runtime/KernelABI.h"

#include <algorithm>
#include <cstdint>

namespace cmask::abi {

//===----------------------------------------------------------------------===//
// Tile-list entries
//===----------------------------------------------------------------------===//

/// A bit field of the entry word.
struct EntryField {
  unsigned shift, width;
  constexpr uint32_t mask() const { return (uint32_t(1) << width) - 1; }
  /// Whether the field ends at bit 31 (no mask is needed after the shift).
  constexpr bool isTop() const { return shift + width == 32; }
};
inline constexpr EntryField kEntryTile{0, 16};      ///< key tile index
inline constexpr EntryField kEntryState{16, 2};     ///< TileState
inline constexpr EntryField kEntryFirstSlot{18, 7}; ///< first slot that meets
inline constexpr EntryField kEntrySlotCount{25, 7}; ///< slots that meet

/// 2 bits per tile, over its in-bounds elements.
enum class TileState : uint32_t { Empty = 0, Partial = 1, Full = 2 };

/// Key tiles per sequence and slots per row that an entry can name.
inline constexpr int64_t kMaxKeyTiles = int64_t(1) << kEntryTile.width;
inline constexpr int64_t kMaxSlots = (int64_t(1) << kEntryFirstSlot.width) - 1;

/// Tiles whose states share one int32 word of tile_state.
inline constexpr int64_t kTilesPerStateWord = 16;

/// A decoded entry.
struct TileEntry {
  uint32_t tile = 0, state = 0, firstSlot = 0, slotCount = 0;
};

constexpr uint32_t field(uint32_t word, EntryField f) {
  return (word >> f.shift) & f.mask();
}

constexpr TileEntry decodeTileEntry(uint32_t word) {
  return {field(word, kEntryTile), field(word, kEntryState),
          field(word, kEntryFirstSlot), field(word, kEntrySlotCount)};
}

constexpr uint32_t encodeTileEntry(const TileEntry &e) {
  return (e.tile & kEntryTile.mask()) << kEntryTile.shift |
         (e.state & kEntryState.mask()) << kEntryState.shift |
         (e.firstSlot & kEntryFirstSlot.mask()) << kEntryFirstSlot.shift |
         (e.slotCount & kEntrySlotCount.mask()) << kEntrySlotCount.shift;
}

/// The state of key tile `t` in a row of state words.
constexpr uint32_t tileState(const int32_t *words, int64_t t) {
  return (static_cast<uint32_t>(words[t / kTilesPerStateWord]) >>
          (2 * (t % kTilesPerStateWord))) &
         3;
}

//===----------------------------------------------------------------------===//
// Column windows (tile_windows, one word per entry)
//===----------------------------------------------------------------------===//

/// Rows of a q tile that share a window: one consumer warpgroup's.
inline constexpr int64_t kWindowRows = 64;
/// Row groups per window word, and the bits of one bound.
inline constexpr int64_t kWindowGroups = 2;
inline constexpr unsigned kWindowBoundBits = 8;
/// Key tiles up to this many columns have windows (a bound fits 8 bits).
inline constexpr int64_t kMaxWindowColumns = 128;

/// The columns [lo, hi) of a tile, relative to its first column, that hold
/// every visible element of one row group: the hull, over the slot indices
/// of the entry's slot range, of the group's rows' slots, clipped to the
/// tile (lo == hi == 0 when none meets it). Sound, not exact: a column
/// inside may be visible to no row.
struct TileWindow {
  uint32_t lo = 0, hi = 0;
};

constexpr unsigned windowShift(int64_t group) {
  return unsigned(group) * 2 * kWindowBoundBits;
}

constexpr TileWindow decodeTileWindow(uint32_t word, int64_t group) {
  uint32_t mask = (uint32_t(1) << kWindowBoundBits) - 1;
  return {(word >> windowShift(group)) & mask,
          (word >> (windowShift(group) + kWindowBoundBits)) & mask};
}

constexpr uint32_t encodeTileWindow(TileWindow g0, TileWindow g1) {
  return g0.lo << windowShift(0) |
         g0.hi << (windowShift(0) + kWindowBoundBits) |
         g1.lo << windowShift(1) | g1.hi << (windowShift(1) + kWindowBoundBits);
}

//===----------------------------------------------------------------------===//
// Buffers of one tile shape
//===----------------------------------------------------------------------===//

/// int32 words of the envelopes per (q tile, slot index) for tiles of `tq`
/// rows: 8 for the q tile, then 8 per chunk of 16 rows.
constexpr int64_t envelopeWords(int64_t tq) { return 8 + 8 * ((tq + 15) / 16); }

/// The sizes (int32 elements) of one tile shape's buffers, for batches of
/// at most `numSeqs` sequences of `totalRows` rows in all and `maxCols`
/// columns each (rows and columns trade places in the column direction).
struct TileLayout {
  int64_t maxQTiles = 0; ///< NQT: total rows / TQ + one per sequence
  int64_t keyTiles = 0;  ///< key tiles of the longest sequence
  int32_t nktWords = 0;  ///< W: state words per q tile
  int64_t stride = 0;    ///< 16 W: tile_info / tile_entries per q tile

  static TileLayout of(int64_t numSeqs, int64_t totalRows, int64_t maxCols,
                       int64_t tq, int64_t tk) {
    TileLayout t;
    t.maxQTiles = (totalRows + tq - 1) / tq + numSeqs;
    t.keyTiles = (maxCols + tk - 1) / tk;
    t.nktWords = static_cast<int32_t>(std::max<int64_t>(
        1, (t.keyTiles + kTilesPerStateWord - 1) / kTilesPerStateWord));
    t.stride = int64_t(t.nktWords) * kTilesPerStateWord;
    return t;
  }

  /// Elements of the tile group's buffer `arg` (tile_group:: index) for
  /// `numSeqs` sequences, K = `numSlots` and tiles of `tq` rows; -1 for the
  /// arguments that are not the shape's own buffers (the scalars, the
  /// direction's cu_seqlens and interval tables, the error flags).
  int64_t elements(int arg, int64_t numSeqs, int64_t numSlots,
                   int64_t tq) const {
    namespace g = tile_group;
    switch (arg) {
    case g::QTileBase:
      return numSeqs + 1;
    case g::QTileSeq:
    case g::TileOrder:
    case g::PartialCounts:
      return maxQTiles;
    case g::Counts:
    case g::TileOffsets:
      return maxQTiles + 1;
    case g::TileState:
    case g::WordPrefix:
      return maxQTiles * nktWords;
    case g::TileInfo:
    case g::TileEntries:
    case g::TileWindowInfo:
    case g::TileWindows:
      return maxQTiles * stride;
    case g::Envelopes:
      return maxQTiles * numSlots * envelopeWords(tq);
    default:
      return -1;
    }
  }

  /// int32 words of all of the shape's buffers.
  int64_t words(int64_t numSeqs, int64_t numSlots, int64_t tq) const {
    int64_t n = 0;
    for (int arg = 0; arg < tile_group::kNumArgs; ++arg)
      n += std::max<int64_t>(0, elements(arg, numSeqs, numSlots, tq));
    return n;
  }
};

/// The query tiles of `tq` rows that a batch of `numSeqs` sequences of
/// `totalRows` rows in all can have (each sequence's last tile may be
/// partial): sum ceil(l / tq) <= (totalRows + numSeqs (tq - 1)) / tq, and at
/// most the buffers' `maxQTiles`. The attention grids cover this many per
/// head, not maxQTiles: a descriptor's bounds may exceed the batch (the
/// Python layer once grew them by powers of two), and
/// 8.7K rows in a descriptor of 16K launched one CTA per head and bound tile,
/// of which 47% only exited.
constexpr int64_t batchQTiles(int64_t maxQTiles, int64_t totalRows,
                              int64_t numSeqs, int64_t tq) {
  if (numSeqs <= 0 || totalRows <= 0 || tq <= 0)
    return 0;
  int64_t tiles = (totalRows + numSeqs * (tq - 1)) / tq;
  return tiles < maxQTiles ? tiles : maxQTiles;
}

//===----------------------------------------------------------------------===//
// Preprocess work items
//===----------------------------------------------------------------------===//

/// What the item counts of a direction's phases depend on.
struct PhaseSizes {
  int64_t numSeqs = 0;   ///< sequences of the batch (check)
  int64_t totalRows = 0; ///< rows of the batch (rows)
  int64_t numSlots = 0;  ///< K of the direction
  int64_t tq = 0;        ///< rows per tile of the shape (tile phases)
  TileLayout tiles;      ///< the shape's buffers (tile phases)
};

/// The work items of `phase` (one per thread of its stage kernel).
constexpr int64_t phaseItems(Phase phase, const PhaseSizes &s) {
  int64_t nqt = s.tiles.maxQTiles;
  switch (phase) {
  case Phase::Check:
    return s.numSeqs;
  case Phase::Rows:
    return s.totalRows;
  case Phase::Seqs:
    return 1;
  case Phase::EnvInit:
    return nqt * s.numSlots;
  case Phase::Env:
    return nqt * s.numSlots * ((s.tq + 15) / 16);
  case Phase::Tiles:
  case Phase::Fill:
    return nqt * s.tiles.stride;
  case Phase::Pack:
    return nqt * s.tiles.nktWords;
  case Phase::Count:
    return nqt;
  case Phase::Scan:
    return nqt + 1;
  }
  return 0;
}

} // namespace cmask::abi

#endif // CMASK_RUNTIME_DESCRIPTORLAYOUT_H
