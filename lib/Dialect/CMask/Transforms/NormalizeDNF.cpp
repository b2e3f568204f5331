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
    options.maxConjuncts = static_cast<size_t>(std::max<int64_t>(1, maxConjuncts));
    for (RegionOp region : getOperation().getRegions()) {
      if (region.hasSlots())
        continue;
      ::cmask::ExprContext ctx;
      const ::cmask::Pred *rule = importPredicate(ctx, region.getRule());
      auto dnf = ::cmask::normalizeRule(ctx, rule, options);
      if (!dnf) {
        emitAnalysisError(dnf.takeError(), region)
                .attachNote(region.getLoc())
            << "while normalizing the rule of region @" << region.getSymName();
        return signalPassFailure();
      }
      exportDNF(region.getRule(), *dnf, region.getLoc());
    }
  }
};
} // namespace
