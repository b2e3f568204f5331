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

/// Registers `--cmask-to-intervals-json` and `--cmask-to-dense-json`.
void registerCMaskEvaluatorTranslations();

} // namespace mlir::cmask

#endif // CMASK_TARGET_EVALUATOR_H
