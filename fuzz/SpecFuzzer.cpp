//===- SpecFuzzer.cpp - libFuzzer target: spec parser and lowering --------===//
//
// Each input is MLIR source. It is parsed with the cmask dialect (every op
// verified); every spec that parses is lowered to slots
// (cmask-lower-to-intervals), and so is its column spec
// (cmask-transpose-spec, then the same pipeline). Errors are expected and
// dropped. What must not happen: a crash or a sanitizer report, a hang
// (libFuzzer's -timeout), memory past -rss_limit_mb, or a lowering that
// changes what the spec shows: on a few small random batches the slots of
// every row (of every key, for the column spec) must hold exactly the keys
// (rows) that the rule shows, as the evaluator (Evaluator.h, which shares no
// code with the compiler) interprets both.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/IR/CMaskOps.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/Dialect/CMask/Transforms/Transpose.h"
#include "cmask/InitCMask.h"
#include "cmask/Target/Evaluator.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace mlir::cmask;

namespace {
/// Inputs longer than this are not tried (the interesting ones are short;
/// the tools' own limits are tested by lit).
constexpr size_t kMaxInputBytes = 1 << 16;
/// The batches of the differential check, and their largest length.
constexpr int kBatches = 6;
constexpr int64_t kMaxLen = 9;
/// The bound on a rule's unrolled unions: lower than the tools' 2^18, which
/// takes 2 s in a release build and 15 s under the sanitizers (each input
/// must stay well below -timeout; the tools' own bound is tested by lit).
constexpr int64_t kMaxUnrolledAtoms = 1 << 13;

MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registerCMaskDialect(registry);
    auto *c = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  return *ctx;
}

/// `spec` lowered to slots in a module of its own (null when the lowering
/// reports an error).
OwningOpRef<ModuleOp> lower(SpecOp spec, bool transpose) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(spec.getLoc());
  auto copy = cast<SpecOp>(spec->clone());
  module->getBody()->push_back(copy);
  if (transpose) {
    if (failed(buildTransposedSpec(copy, getColumnSpecName(spec))))
      return nullptr;
    copy->erase();
  }
  PassManager pm(spec.getContext(), ModuleOp::getOperationName());
  NormalizeDNFPassOptions limits;
  limits.maxUnrolledAtoms = kMaxUnrolledAtoms;
  buildLowerToIntervalsPipeline(pm, limits);
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

[[noreturn]] void mismatch(SpecOp spec, bool columns,
                           const BatchMetadata &batch, int64_t b, int64_t i,
                           int64_t j, bool rule) {
  llvm::errs() << "cmask-spec-fuzzer: the " << (columns ? "column" : "row")
               << " slots of @" << spec.getSymName() << " disagree with its "
               << "rule: sequence " << b << " (q_len "
               << batch.sequences[b].qLen << ", k_len "
               << batch.sequences[b].kLen << "), row " << i << ", key " << j
               << ": the rule " << (rule ? "shows" : "hides") << " it\n";
  std::abort();
}

/// The differential check of `lowered` (slot form of `spec`, or of its
/// column spec) against `spec`'s rule.
void compare(SpecOp spec, SpecOp lowered, bool columns, std::mt19937_64 &rng) {
  SpecEvaluator rule(spec), slots(lowered);
  llvm::SmallVector<std::pair<int64_t, int64_t>> out;
  for (int n = 0; n < kBatches; ++n) {
    BatchMetadata batch = randomSmallBatch(spec, rng, kMaxLen, n % 2 == 0);
    BatchMetadata swapped = batch;
    for (auto &seq : swapped.sequences)
      std::swap(seq.qLen, seq.kLen);
    for (int64_t b = 0; b < static_cast<int64_t>(batch.sequences.size()); ++b) {
      int64_t q = batch.sequences[b].qLen, k = batch.sequences[b].kLen;
      rule.setSequence(batch, b);
      slots.setSequence(columns ? swapped : batch, b);
      // Row (or key) r of the lowered spec: the set it shows.
      std::vector<char> shown(q * k, 0);
      for (int64_t r = 0; r < (columns ? k : q); ++r) {
        int region = slots.regionFor(r);
        if (region < 0)
          continue;
        out.clear();
        slots.slots(region, r, out);
        for (auto [lo, hi] : out)
          for (int64_t c = lo; c < hi; ++c)
            shown[columns ? c * k + r : r * k + c] = 1;
      }
      for (int64_t i = 0; i < q; ++i) {
        int region = rule.regionFor(i);
        for (int64_t j = 0; j < k; ++j) {
          bool sees = region >= 0 && rule.sees(region, i, j);
          if (sees != static_cast<bool>(shown[i * k + j]))
            mismatch(spec, columns, batch, b, i, j, sees);
        }
      }
    }
  }
}

bool inRuleForm(SpecOp spec) {
  return llvm::none_of(spec.getRegions(),
                       [](RegionOp region) { return region.hasSlots(); });
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1;
  MLIRContext &ctx = context();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  // MLIR's lexer reads one character past the text: the tools parse files,
  // whose buffers end in a NUL, and so must the fuzzer's copy.
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, ParserConfig(&ctx), "input");
  if (!module)
    return 0;
  std::mt19937_64 rng(0x5eed5eedULL);
  for (SpecOp spec : module->getOps<SpecOp>()) {
    bool ruleForm = inRuleForm(spec);
    for (bool columns : {false, true}) {
      if (columns && !ruleForm)
        break; // only a rule transposes
      OwningOpRef<ModuleOp> lowered = lower(spec, columns);
      if (lowered && ruleForm)
        compare(spec, *lowered->getOps<SpecOp>().begin(), columns, rng);
    }
  }
  return 0;
}
