//===- Evaluator.h - Evaluate a MaskSpec on concrete metadata ---*- C++ -*-===//
//
// Used by the `cmask-translate` JSON translations: it evaluates guards, rules
// (element by element: the oracle) and interval slots (row by row) of a
// spec by interpreting its ops. It shares no code with the Analysis library,
// so the oracle does not inherit the compiler's mistakes.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_EVALUATOR_H
#define CMASK_TARGET_EVALUATOR_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"
#include "cmask/Target/MetadataFile.h"

#include <memory>
#include <random>
#include <vector>

namespace mlir::cmask {

class CompiledRegion;

/// Evaluates the regions of a spec for one sequence of a batch.
class SpecEvaluator {
public:
  explicit SpecEvaluator(SpecOp spec);
  ~SpecEvaluator();

  /// Selects sequence `b` of `batch`.
  void setSequence(const BatchMetadata &batch, int64_t b);

  /// The index of the region that applies to row `i`, or -1.
  int regionFor(int64_t i);
  /// Whether row `i` sees key `j` under region `region`'s rule (yield form).
  bool sees(int region, int64_t i, int64_t j);
  /// Row `i`'s slots under region `region`'s rule (slot form), clamped to
  /// [0, k_len]; empty slots are (0, 0).
  void slots(int region, int64_t i,
             llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &out);

  size_t getNumRegions() const { return guards.size(); }

private:
  std::vector<std::unique_ptr<CompiledRegion>> guards, rules;
  const BatchMetadata *batch = nullptr;
  int64_t b = 0;
};

/// The batches the CPU evaluators of cmask-translate take
/// (docs/metadata-json.md, Limits): their work and output grow with the
/// rows, the slots and, in the dense mode, with every (query, key) pair. The
/// runtime on the GPU has none of these limits.
inline constexpr int64_t kMaxEvaluatedRows = 1 << 22;
inline constexpr int64_t kMaxEvaluatedKeys = 1 << 22;
inline constexpr int64_t kMaxEvaluatedSlots = 1 << 24;
inline constexpr int64_t kMaxDenseElements = 1 << 26;

/// A random small batch for `spec`: one to three sequences of 0 to `maxLen`
/// rows, each with as many keys unless `varyKeys` (then 0 to `maxLen`), and
/// metadata around them (scalars and per-sequence values in [-2, maxLen +
/// 2], up to 4 sorted offsets within the sequence). Small lengths and such
/// metadata exercise every boundary of a rule.
BatchMetadata randomSmallBatch(SpecOp spec, std::mt19937_64 &rng,
                               int64_t maxLen, bool varyKeys);

/// Registers `--cmask-to-intervals-json` and `--cmask-to-dense-json`.
void registerCMaskEvaluatorTranslations();

} // namespace mlir::cmask

#endif // CMASK_TARGET_EVALUATOR_H
