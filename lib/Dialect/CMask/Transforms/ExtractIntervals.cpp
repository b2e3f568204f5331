//===- ExtractIntervals.cpp - cmask-extract-intervals ---------------------===//
//
// Turns every normalized rule into one slot per conjunct
// (cmask::extractIntervals): the rule then ends in cmask.slots.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "cmask/Analysis/Intervals.h"
#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_EXTRACTINTERVALSPASS
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

namespace {
struct ExtractIntervalsPass
    : public mlir::cmask::impl::ExtractIntervalsPassBase<ExtractIntervalsPass> {
  void runOnOperation() override {
    for (RegionOp region : getOperation().getRegions()) {
      if (region.hasSlots())
        continue;
      ::cmask::ExprContext ctx;
      const ::cmask::Pred *rule = importPredicate(ctx, region.getRule());
      auto dnf = ::cmask::fromPred(ctx, rule);
      if (!dnf) {
        emitAnalysisError(dnf.takeError(), region);
        return signalPassFailure();
      }
      auto slots = ::cmask::extractIntervals(ctx, *dnf);
      if (!slots) {
        emitAnalysisError(slots.takeError(), region);
        return signalPassFailure();
      }
      exportSlots(region.getRule(), *slots, region.getLoc());
    }
  }
};
} // namespace
