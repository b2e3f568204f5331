//===- Schedule.h - The forward's schedule choice ---------------*- C++ -*-===//
//
// The forward attention runs one CTA per work item (head, query tile), or,
// with the persistent kernel (128x128 tiles), one CTA per SM taking items
// from a counter until none is left. Which one a call gets (no CUDA: the
// runtime's unit tests include it).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_SCHEDULE_H
#define CMASK_RUNTIME_SCHEDULE_H

#include <cstdint>

namespace cmask::rt {

/// AttentionArgs::schedule (the C API's cmask_attention_args.schedule).
enum class Schedule { Auto = 0, Grid = 1, Persistent = 2 };

/// Auto's choice for a launch of `items` work items (query tiles of the
/// bound x heads) on `sms` SMs over `numSeqs` sequences of `totalK` keys in
/// all: the persistent kernel for at least 2 waves of items of one sequence
/// of at most 8192 keys or of a batch whose sequences average less than
/// 8192, the grid kernel otherwise. On the H200, with the items in sections
/// (sectionHeads), the persistent kernel measured 12-20% faster than the
/// grid kernel on batches of 1K-8K and on packed documents of 32-4096
/// tokens (32K tokens in all) and 14-18% on single sequences of 4K-8K (GQA
/// 32/8 4K included); at 16K (one sequence, 2 x 16K, GQA 32/8) the grid
/// kernel was 1-4% faster, at 32K 1-3% (docs/performance.md, 2026-12-01).
/// On the kernels and sections of 2026-12-07 (forty-seventh session) the
/// grid kernel is the faster on batches of 8K sequences, at the H200's power
/// limit and in short samples alike: 2 x 8K 1.021x and 1.024x, 4 x 8K 1.010x
/// and 1.012x (an H100: 1.03x and 1.01x), 8 x 8K the same (1.001x, 0.993x);
/// 4 x 6K is within 1% (1.007x, 1.004x). A single 8K sequence stays
/// persistent: 0.98x at the power limit but 1.04x in short samples, and
/// GQA 32/8 8K 1.01x at the limit.
inline bool choosePersistent(int64_t items, int64_t sms, int64_t totalK,
                             int64_t numSeqs) {
  if (sms <= 0 || numSeqs <= 0)
    return false;
  constexpr int64_t kMaxKeys = 8192;
  bool shortEnough =
      numSeqs == 1 ? totalK <= kMaxKeys : totalK < kMaxKeys * numSeqs;
  return items >= 2 * sms && shortEnough;
}

/// The persistent kernel's items come in sections of this many query heads
/// (abi::forward's section_heads): heads innermost in a section, so that
/// the dynamic schedule takes the heaviest query tiles of several heads
/// first while the K/V of the running items stays what L2 can serve. Two
/// bounds, in KV heads (a section holds their query heads; at least one KV
/// head, at most all `heads`):
///
/// - Bytes: as many KV heads as a budget of their keys and values cover
///   (`totalK` keys of `headDim` elements of `elementBytes` each, K and V):
///   kBatchSectionBytes (16 MiB) for a batch of several sequences
///   (`maxSeqlenK` below `totalK`), kSectionBytes (64 MiB) for one sequence
///   or an unknown bound. Back to back on an H100 at its power limit
///   (docs/performance.md, 2026-12-07, forty-fifth session), sections of 1
///   head ran 8 x 4K 1.04x faster than of 4 (DRAM reads 2.52 -> 1.04 GB at
///   1.01x the cycles), 16 x 2K 1.016x faster than of 2 (the same cycles),
///   packed documents (32K tokens) 1.01x faster than of 4. On one sequence
///   fewer heads cost cycles: 8 heads took 1.08x the cycles of 32 at 4K
///   (1.03x faster back to back, the clock higher), 4 heads 1.11x those of
///   16 at 8K (the same time back to back), so a single sequence keeps the
///   64 MiB that was the H200's measured best in short samples (of sections
///   of 1 to 32 heads at 32 heads, the fastest or one within 2.5% for single
///   sequences of 4K-32K keys, GQA 32/8 4K and 16K included).
/// - Readers: the `sms` running items (one per SM) are the next `sms` of
///   the section's order, heads innermost; over a batch of about `totalK /
///   maxSeqlenK` sequences of the longest length they read as many K/V
///   streams (sequence x KV head) per KV head of the section. Each stream
///   should have kReadersPerStream of them at once, so that a K/V tile
///   fetched from DRAM serves the others from L2: at most `sms x
///   maxSeqlenK / (kReadersPerStream x totalK)` KV heads. On an H100 (132 SMs),
///   sections of 1 to 32 heads at 32 heads: 8 x 1K ran 1.50x faster with 4
///   heads than with a 64 MiB bytes bound's 16 (2 readers a stream at 8 heads:
///   1.38x), 8 x 2K 1.04x with 4 (8: 0.99x), 16 x 1K and 32 x 1K 1.45x with 2
///   and 1; 16 x 2K measured best at 2 on the H200 too (docs/performance.md,
///   2026-12-01 and 2026-12-06; a batch's 16 MiB bytes bound is the lower one
///   from 8 x 2K up: 8 x 2K takes 2 heads, within 1% of 4 and 1.015x faster
///   than 1, 16 x 2K 1, 1.016x faster than 2, and 4 x 8K 1, 1.015x faster
///   than 4, at the power limit; 2026-12-07). It leaves single sequences (one
///   stream per KV head) to the bytes bound up to sms / kReadersPerStream KV
///   heads.
///
/// `maxSeqlenK` is the descriptor's bound on the longest sequence's keys
/// (taken as at most `totalK`; 0: unknown, no readers bound): a descriptor
/// made for longer sequences than its batch has gets the bytes bound's
/// larger sections.
/// The backward's grid order interleaves its last heads within a budget of
/// its own (lib/Conversion/CMaskToGPU/BackwardWalk.h, kInterleaveBytes,
/// 64 MiB for batches too: not measured at 16, which would change only
/// short batches' tails; its note says which).
inline constexpr int64_t kSectionBytes = int64_t{64} << 20;
inline constexpr int64_t kBatchSectionBytes = int64_t{16} << 20;
inline constexpr int64_t kReadersPerStream = 4;

inline int64_t sectionHeads(int64_t heads, int64_t kvHeads, int64_t totalK,
                            int64_t maxSeqlenK, int64_t sms, int64_t headDim,
                            int64_t elementBytes) {
  if (heads <= 0 || kvHeads <= 0)
    return 1;
  int64_t perKvHead = 2 * totalK * headDim * elementBytes;
  bool batch = maxSeqlenK > 0 && maxSeqlenK < totalK;
  int64_t budget = batch ? kBatchSectionBytes : kSectionBytes;
  int64_t kv = perKvHead > 0 ? budget / perKvHead : kvHeads;
  if (sms > 0 && maxSeqlenK > 0 && totalK > 0) {
    int64_t longest = maxSeqlenK < totalK ? maxSeqlenK : totalK;
    int64_t byReaders = sms * longest / (kReadersPerStream * totalK);
    kv = kv < byReaders ? kv : byReaders;
  }
  kv = kv < 1 ? 1 : (kv > kvHeads ? kvHeads : kv);
  int64_t group = heads / kvHeads;
  return kv * (group < 1 ? 1 : group);
}

/// The section_heads argument of a launch: `requested` (a call's own,
/// AttentionArgs::sectionHeads) where at least 1, at most `heads` (more is
/// one section; the kernel multiplies the section by the query tiles in
/// 32 bits, which heads x query tiles fits); sectionHeads otherwise.
inline int64_t launchSectionHeads(int64_t requested, int64_t heads,
                                  int64_t kvHeads, int64_t totalK,
                                  int64_t maxSeqlenK, int64_t sms,
                                  int64_t headDim, int64_t elementBytes) {
  if (requested > 0)
    return requested < heads ? requested : (heads > 0 ? heads : 1);
  return sectionHeads(heads, kvHeads, totalK, maxSeqlenK, sms, headDim,
                      elementBytes);
}

/// The tile shape of a call that names none (AttentionArgs::tileShape -1):
/// 128x128 where the artifact's default (its manifest's default_tile_shape)
/// has narrower key tiles (128x64: the compiler's default for specs with
/// more than two slots per row, whose tiles are mostly partial) and the
/// batch's sequences average at most 65536 keys; the default otherwise.
/// On the H200, CLEAR (the benchmark's grids) ran 1.19x faster at 128x128
/// at 8.7K keys and 1.21x at 16.9K, and 7% slower at 33.3K; with the
/// 128x128 kernel's column windows, 1.10x faster at 33.3K (2026-12-02,
/// docs/performance.md). Longer sequences were not measured.
inline constexpr int64_t kSquareTileKeys = 65536;

inline bool chooseSquareTiles(int64_t defaultKeyTile, bool haveSquare,
                              int64_t totalK, int64_t numSeqs) {
  return defaultKeyTile < 128 && haveSquare && numSeqs > 0 &&
         totalK <= kSquareTileKeys * numSeqs;
}

/// AttentionArgs::gqaPacking (the C API's cmask_attention_args.gqa_packing):
/// whether a forward work item's 128 rows are one query head's 128
/// positions or the `heads / kvHeads` query heads of one KV head at
/// 128 / (heads / kvHeads) positions each (abi::forward's q_pack_shift,
/// docs/attention.md "GQA packing"). On the H200 (GQA 32/8, forward),
/// packing measured 1.04-1.06x on packed documents (30 of 32-4096 tokens)
/// and HSTU 8K, 1.57-1.71x on batches of 32-token sequences and 200 short
/// documents, and within the run's spread (0.99-1.01x) on causal 4K-32K,
/// 8 x 4K, HSTU 16K, RM 16K and CLEAR 8K-32K (docs/performance.md,
/// 2026-12-04): Auto packs wherever the group can.
enum class GqaPacking { Auto = 0, Off = 1, On = 2 };

/// log2 of the query heads per KV head where that group can pack (a power
/// of two from 2 to 64, so that a 64-row box holds whole positions of it),
/// -1 where it cannot (no GQA, or another group size).
inline int packableShift(int64_t heads, int64_t kvHeads) {
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return -1;
  int64_t group = heads / kvHeads;
  for (int shift = 1; shift <= 6; ++shift)
    if (group == (int64_t{1} << shift))
      return shift;
  return -1;
}

/// The q_pack_shift of a call: Auto and On pack where the group can; Off
/// never does. -1: On asked for a group that cannot pack.
inline int gqaPackShift(GqaPacking packing, int64_t heads, int64_t kvHeads) {
  int shift = packableShift(heads, kvHeads);
  switch (packing) {
  case GqaPacking::Off:
    return 0;
  case GqaPacking::On:
    return shift;
  case GqaPacking::Auto:
    break;
  }
  return shift < 0 ? 0 : shift;
}

} // namespace cmask::rt

#endif // CMASK_RUNTIME_SCHEDULE_H
