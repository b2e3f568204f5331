//===- Columns.cpp - Derive the column direction of a MaskSpec ------------===//
//
// deriveColumns and compileSpec (Columns.h): the transposed spec lowered
// quietly, the symmetric fallback with its randomized check, the row mode
// otherwise; and the copy of a spec lowered for the preprocess.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/Columns.h"

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/Dialect/CMask/Transforms/Transpose.h"
#include "cmask/Target/Evaluator.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <random>

using namespace mlir;
using namespace mlir::cmask;

llvm::StringRef mlir::cmask::stringifyColumnMode(ColumnMode mode) {
  switch (mode) {
  case ColumnMode::Derived:
    return "derived";
  case ColumnMode::Symmetric:
    return "symmetric";
  case ColumnMode::Rows:
    return "rows";
  }
  llvm_unreachable("unknown column mode");
}

/// Lowers the only spec of `module` to slots; on failure returns the first
/// error's text (and prints nothing).
static FailureOr<SpecOp> lowerQuietly(ModuleOp module, std::string &why) {
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return failure(); // warnings and remarks go to the usual handler
    if (why.empty())
      why = diag.str();
    return success();
  });
  PassManager pm(ctx, ModuleOp::getOperationName());
  buildLowerToIntervalsPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  return *module.getOps<SpecOp>().begin();
}

FailureOr<ColumnDirection> mlir::cmask::deriveColumns(SpecOp source,
                                                      ModuleOp into) {
  ColumnDirection result;
  std::string name = getColumnSpecName(source);
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(source.getLoc());
  auto copy = cast<SpecOp>(source->clone());
  scratch->getBody()->push_back(copy);
  auto transposed = buildTransposedSpec(copy, name);
  if (failed(transposed))
    return failure();
  copy->erase();
  auto lowered = lowerQuietly(*scratch, result.reason);
  if (succeeded(lowered) &&
      lowered->getNumSlots().value_or(0) > kMaxDescriptorSlots) {
    // Negated guards can multiply the slots: too many for the descriptor.
    result.reason = "the column spec has " +
                    std::to_string(*lowered->getNumSlots()) +
                    " slots per key; the descriptor holds at most " +
                    std::to_string(kMaxDescriptorSlots);
    lowered = failure();
  } else if (failed(lowered)) {
    // Its `i` is the key column and its `j` the query row.
    result.reason =
        "the transposed rule (i: key, j: query row): " + result.reason;
  }
  if (succeeded(lowered)) {
    result.mode = ColumnMode::Derived;
  } else if (source.getSymmetric()) {
    if (failed(checkSymmetry(source)))
      return failure();
    // The columns are the rows: the spec itself, under the column name.
    scratch = ModuleOp::create(source.getLoc());
    auto same = cast<SpecOp>(source->clone());
    same.setSymName(name);
    scratch->getBody()->push_back(same);
    std::string why;
    lowered = lowerQuietly(*scratch, why);
    if (failed(lowered))
      return emitError(source.getLoc()) << "lowering the symmetric column "
                                           "direction failed: "
                                        << why;
    result.mode = ColumnMode::Symmetric;
  } else {
    result.mode = ColumnMode::Rows;
    return result;
  }
  (*lowered)->remove();
  into.getBody()->push_back(*lowered);
  result.spec = *lowered;
  return result;
}

FailureOr<CompiledSpec>
mlir::cmask::compileSpec(SpecOp source, llvm::ArrayRef<TileShape> shapes,
                         llvm::ArrayRef<TileShape> columnShapes) {
  CompiledSpec out;
  out.module = ModuleOp::create(source.getLoc());
  out.module->getBody()->push_back(source->clone());
  PassManager pm(source.getContext(), ModuleOp::getOperationName());
  buildLowerToIntervalsPipeline(pm);
  if (failed(pm.run(*out.module)))
    return failure();
  out.rows = *out.module->getOps<SpecOp>().begin();
  // Too many slots for the descriptor: said once, at the region, before the
  // column direction is derived (it would only repeat the work).
  for (RegionOp region : out.rows.getRegions())
    if (region.getNumSlots().value_or(0) > kMaxDescriptorSlots)
      return region.emitOpError()
             << "has " << *region.getNumSlots()
             << " slots per row; the descriptor "
             << "supports at most " << kMaxDescriptorSlots
             << " (split the rule into regions or narrow its unions)";
  auto columns = deriveColumns(source, *out.module);
  if (failed(columns))
    return failure();
  out.columns = *columns;
  out.parts.push_back({out.rows, llvm::SmallVector<TileShape>(shapes)});
  if (out.columns.spec)
    out.parts.push_back(
        {out.columns.spec, llvm::SmallVector<TileShape>(columnShapes)});
  return out;
}

LogicalResult mlir::cmask::checkSymmetry(SpecOp spec) {
  // Small lengths and metadata around them exercise every boundary of a
  // rule; a fixed seed keeps compilation deterministic.
  constexpr int kBatches = 600, kMaxLen = 11;
  std::mt19937_64 rng(0x5eed5eedULL);
  SpecEvaluator eval(spec);
  for (int n = 0; n < kBatches; ++n) {
    // One to three sequences; each is checked (rules may depend on b).
    BatchMetadata batch =
        randomSmallBatch(spec, rng, kMaxLen, /*varyKeys=*/n % 3 == 0);
    BatchMetadata swapped = batch;
    for (auto &seq : swapped.sequences)
      std::swap(seq.qLen, seq.kLen);
    int64_t numSeqs = batch.sequences.size();

    for (int64_t b = 0; b < numSeqs; ++b) {
      int64_t q = batch.sequences[b].qLen, k = batch.sequences[b].kLen;
      std::vector<char> sees(q * k);
      eval.setSequence(batch, b);
      for (int64_t i = 0; i < q; ++i) {
        int region = eval.regionFor(i);
        for (int64_t j = 0; j < k; ++j)
          sees[i * k + j] = region >= 0 && eval.sees(region, i, j);
      }
      eval.setSequence(swapped, b);
      for (int64_t j = 0; j < k; ++j) {
        int region = eval.regionFor(j);
        for (int64_t i = 0; i < q; ++i) {
          bool back = region >= 0 && eval.sees(region, j, i);
          if (back == static_cast<bool>(sees[i * k + j]))
            continue;
          std::string where;
          llvm::raw_string_ostream os(where);
          os << "sequence " << b << " (q_len = " << q << ", k_len = " << k
             << ")";
          for (MetadataOp m : spec.getMetadata()) {
            llvm::StringRef name = m.getSymName();
            os << ", @" << name << " = ";
            if (m.getRole() == MetadataRole::scalar)
              os << batch.scalars[name];
            else if (m.getRole() == MetadataRole::per_sequence)
              os << batch.perSequence[name][b];
            else
              os << "["
                 << llvm::join(llvm::map_range(
                                   batch.offsets[name][b],
                                   [](int64_t v) { return std::to_string(v); }),
                               ", ")
                 << "]";
          }
          return spec.emitOpError()
                 << "is declared symmetric, but in " << where << " row " << i
                 << (sees[i * k + j] ? " sees" : " does not see") << " key "
                 << j << " while, with q_len and k_len swapped, row " << j
                 << (back ? " sees" : " does not see") << " key " << i
                 << "; remove `symmetric` (the column direction then falls "
                    "back to row intervals) or fix the rule";
        }
      }
    }
  }
  return success();
}
