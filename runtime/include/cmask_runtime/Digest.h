//===- Digest.h - A digest of an Execution Descriptor -----------*- C++ -*-===//
//
// Header-only and dependency-free, so that the compiler's CPU twin
// (cmask-translate --descriptor-digest) and the GPU tools hash exactly the
// same ranges in the same order, for the row direction and then the column
// direction when the descriptor has one: the interval table, then per tile
// shape NQT, q_tile_seq[NQT], tile_state[NQT * W], tile_offsets[NQT + 1],
// tile_entries[offsets[NQT]] and tile_order[NQT].
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_DIGEST_H
#define CMASK_RUNTIME_DIGEST_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cmask::rt {

/// FNV-1a over the little-endian bytes of int32 values.
inline uint64_t fnv1a(uint64_t h, const int32_t *p, size_t n) {
  for (size_t k = 0; k < n; ++k)
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (static_cast<uint32_t>(p[k]) >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  return h;
}

class DescriptorDigest {
public:
  void intervals(const int32_t *table, size_t n) { h = fnv1a(h, table, n); }
  /// One tile shape's buffers (host copies); `numEntries` bounds what is
  /// read of tileEntries (offsets[NQT] when the descriptor is sound).
  void tiles(int32_t numQTiles, int32_t nktWords, const int32_t *qTileSeq,
             const int32_t *tileState, const int32_t *tileOffsets,
             const int32_t *tileEntries, size_t numEntries,
             const int32_t *tileOrder) {
    size_t nqt = static_cast<size_t>(numQTiles);
    h = fnv1a(h, &numQTiles, 1);
    h = fnv1a(h, qTileSeq, nqt);
    h = fnv1a(h, tileState, nqt * static_cast<size_t>(nktWords));
    h = fnv1a(h, tileOffsets, nqt + 1);
    size_t entries =
        nqt ? static_cast<size_t>(std::max(tileOffsets[nqt], 0)) : 0;
    h = fnv1a(h, tileEntries, std::min(entries, numEntries));
    h = fnv1a(h, tileOrder, nqt);
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx",
                  static_cast<unsigned long long>(h));
    return out;
  }

private:
  uint64_t h = 14695981039346656037ull;
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_DIGEST_H
