//===- NormalizeDNF.cpp - cmask-normalize-dnf -----------------------------===//
//
// Rewrites every region's rule into DNF with j isolated in every atom
// (cmask::normalizeRule). Rules already lowered to slots are left alone.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "cmask/Analysis/Normalize.h"
#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_NORMALIZEDNFPASS
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

namespace {
struct NormalizeDNFPass
    : public mlir::cmask::impl::NormalizeDNFPassBase<NormalizeDNFPass> {
  using Base::Base;

  void runOnOperation() override {
    ::cmask::NormalizeOptions options;
    options.maxConjuncts =
        static_cast<size_t>(std::max<int64_t>(1, maxConjuncts));
    options.maxUnrolledAtoms =
        static_cast<size_t>(std::max<int64_t>(1, maxUnrolledAtoms));
    for (RegionOp region : getOperation().getRegions()) {
      // The guard is kept as written, but the passes after this one reason
      // with it (the slot prover's facts) and the preprocess evaluates its
      // simplified form: its constant arithmetic must not overflow either.
      ::cmask::ExprContext guardCtx;
      auto guard = ::cmask::unrollUnions(
          guardCtx, importPredicate(guardCtx, region.getGuard()), options);
      if (guard && guardCtx.hasOverflowed())
        guard = llvm::make_error<::cmask::AnalysisError>(
            "constant arithmetic here overflows 64-bit integers (the "
            "compiler's exact "
            "rewrites would no longer match the 64-bit evaluation); use "
            "smaller constants",
            guardCtx.getOverflowOrigin());
      if (!guard) {
        emitAnalysisError(guard.takeError(), region).attachNote(region.getLoc())
            << "while normalizing the guard of region @" << region.getSymName();
        return signalPassFailure();
      }
      if (region.hasSlots())
        continue;
      ::cmask::ExprContext ctx;
      const ::cmask::Pred *rule = importPredicate(ctx, region.getRule());
      auto dnf = ::cmask::normalizeRule(ctx, rule, options);
      if (!dnf) {
        emitAnalysisError(dnf.takeError(), region).attachNote(region.getLoc())
            << "while normalizing the rule of region @" << region.getSymName();
        return signalPassFailure();
      }
      exportDNF(region.getRule(), *dnf, region.getLoc());
    }
  }
};
} // namespace
