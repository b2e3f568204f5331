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
/// all: the persistent kernel for at least 32 waves of items of sequences of
/// at most 4096 keys on average, or for one sequence of at most 8192 keys
/// with at least 4 waves of items; the grid kernel otherwise. These are the
/// shapes where it measured faster on the H200 (5-16%: batches of 2K-4K,
/// packed documents of 32-4096 tokens, single sequences of 4K-8K at 32
/// heads); it measured 7-12% slower at 16K-32K and 2-11% slower on 4 x 8K
/// (docs/performance.md, 2026-12-01).
inline bool choosePersistent(int64_t items, int64_t sms, int64_t totalK,
                             int64_t numSeqs) {
  if (sms <= 0 || numSeqs <= 0)
    return false;
  bool shortBatch = items >= 32 * sms && totalK <= 4096 * numSeqs;
  bool shortSequence = numSeqs == 1 && items >= 4 * sms && totalK <= 8192;
  return shortBatch || shortSequence;
}

} // namespace cmask::rt

#endif // CMASK_RUNTIME_SCHEDULE_H
