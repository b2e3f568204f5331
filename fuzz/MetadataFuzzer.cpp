//===- MetadataFuzzer.cpp - libFuzzer target: the metadata reader ---------===//
//
// Each input is a metadata file (docs/metadata-json.md). It is read for
// every spec of the catalog (masks/*.mlir, parsed once: scalar,
// per-sequence and offsets metadata) under the limits of
// `cmask-translate --cmask-to-intervals-json` (every other spec accepting
// windows, as --cmask-to-descriptor-json does); a batch that is read and
// small is then evaluated (every row's region and slots, and the rule for
// every key). Errors are expected and dropped; a crash, a sanitizer
// report, a hang or memory past -rss_limit_mb are failures.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/IR/CMaskOps.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/InitCMask.h"
#include "cmask/Target/Evaluator.h"
#include "cmask/Target/MetadataFile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace mlir;
using namespace mlir::cmask;

namespace {
constexpr size_t kMaxInputBytes = 1 << 16;
/// Batches up to this many (row, key) pairs are evaluated.
constexpr int64_t kMaxEvaluatedPairs = 1 << 12;

struct Catalog {
  MLIRContext context;
  llvm::SmallVector<OwningOpRef<ModuleOp>> modules;
  /// Each spec in rule form and lowered to slots.
  llvm::SmallVector<std::pair<SpecOp, SpecOp>> specs;
};

/// The catalog's specs, from CMASK_FUZZ_MASKS (default: the source tree's
/// masks/).
Catalog &catalog() {
  static Catalog *c = [] {
    auto *out = new Catalog;
    DialectRegistry registry;
    registerCMaskDialect(registry);
    out->context.appendDialectRegistry(registry);
    out->context.disableMultithreading();
    out->context.loadAllAvailableDialects();
    const char *env = std::getenv("CMASK_FUZZ_MASKS");
    std::string dir = env ? env : CMASK_MASKS_DIR;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
         it.increment(ec)) {
      if (llvm::sys::path::extension(it->path()) != ".mlir")
        continue;
      OwningOpRef<ModuleOp> rules =
          parseSourceFile<ModuleOp>(it->path(), ParserConfig(&out->context));
      OwningOpRef<ModuleOp> slots =
          parseSourceFile<ModuleOp>(it->path(), ParserConfig(&out->context));
      PassManager pm(&out->context, ModuleOp::getOperationName());
      buildLowerToIntervalsPipeline(pm);
      if (!rules || !slots || failed(pm.run(*slots))) {
        llvm::errs() << "cmask-metadata-fuzzer: cannot compile " << it->path()
                     << "\n";
        std::abort();
      }
      out->specs.push_back(
          {*rules->getOps<SpecOp>().begin(), *slots->getOps<SpecOp>().begin()});
      out->modules.push_back(std::move(rules));
      out->modules.push_back(std::move(slots));
    }
    if (out->specs.empty()) {
      llvm::errs() << "cmask-metadata-fuzzer: no specs in " << dir
                   << " (set CMASK_FUZZ_MASKS)\n";
      std::abort();
    }
    return out;
  }();
  return *c;
}

/// Every row's slots and every pair's rule: the evaluators on hostile
/// (but valid) metadata.
void evaluate(SpecOp rules, SpecOp slots, const BatchMetadata &batch) {
  SpecEvaluator rule(rules), slot(slots);
  llvm::SmallVector<std::pair<int64_t, int64_t>> out;
  volatile int64_t sink = 0;
  for (int64_t b = 0; b < static_cast<int64_t>(batch.sequences.size()); ++b) {
    rule.setSequence(batch, b);
    slot.setSequence(batch, b);
    for (int64_t i = 0; i < batch.sequences[b].qLen; ++i) {
      int region = rule.regionFor(i);
      for (int64_t j = 0; j < batch.sequences[b].kLen; ++j)
        sink = sink + (region >= 0 && rule.sees(region, i, j));
      int slotRegion = slot.regionFor(i);
      if (slotRegion >= 0) {
        out.clear();
        slot.slots(slotRegion, i, out);
        sink = sink + static_cast<int64_t>(out.size());
      }
    }
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1;
  Catalog &c = catalog();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // cmask-translate's bounds for the interval evaluator.
  MetadataLimits limits;
  limits.maxRows = kMaxEvaluatedRows;
  limits.maxKeys = kMaxEvaluatedKeys;
  for (auto [k, spec] : llvm::enumerate(c.specs)) {
    auto [rules, slots] = spec;
    // Every other spec reads as --cmask-to-descriptor-json does (windows
    // accepted), the others as the evaluators (windows refused).
    limits.windows = k % 2 == 0;
    llvm::Expected<MetadataFile> file = parseMetadataText(text, rules, limits);
    if (!file) {
      llvm::consumeError(file.takeError());
      continue;
    }
    for (const BatchMetadata &batch : file->batches) {
      int64_t pairs = 0;
      for (const auto &seq : batch.sequences)
        pairs += seq.qLen * seq.kLen;
      if (pairs <= kMaxEvaluatedPairs)
        evaluate(rules, slots, batch);
    }
  }
  return 0;
}
