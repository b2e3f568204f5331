//===- Evaluator.h - Evaluate a MaskSpec on concrete metadata ---*- C++ -*-===//
//
// Used by the `cmask-translate` JSON translations: it reads a metadata file,
// validates it against a spec's declarations, and evaluates guards, rules
// (element by element: the oracle) and interval slots (row by row) of a
// spec by interpreting its ops. It shares no code with the Analysis library,
// so the oracle does not inherit the compiler's mistakes.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_EVALUATOR_H
#define CMASK_TARGET_EVALUATOR_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <vector>

namespace mlir::cmask {

/// The concrete metadata of one batch.
struct BatchMetadata {
  struct Sequence {
    int64_t qLen = 0, kLen = 0;
  };
  std::vector<Sequence> sequences;
  llvm::StringMap<int64_t> scalars;
  llvm::StringMap<std::vector<int64_t>> perSequence;
  llvm::StringMap<std::vector<std::vector<int64_t>>> offsets;
};

/// Reads one batch (a JSON object as documented in docs/metadata-json.md)
/// and checks it against the spec's metadata declarations. `where` prefixes
/// error messages (e.g. "batch 3").
llvm::Expected<BatchMetadata> parseBatchMetadata(const llvm::json::Value &json,
                                                 SpecOp spec,
                                                 llvm::StringRef where);

/// Reads a metadata file: one batch object, or an array of them.
llvm::Expected<std::vector<BatchMetadata>>
readMetadataFile(llvm::StringRef path, SpecOp spec, bool &isArray);

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
