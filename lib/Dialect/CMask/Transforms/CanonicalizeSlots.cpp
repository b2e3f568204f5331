//===- CanonicalizeSlots.cpp - cmask-canonicalize-slots -------------------===//
//
// Simplifies every region's slots with the facts that hold for its rows
// (cmask::canonicalizeSlots) and records K per region and for the spec.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "cmask/Analysis/Slots.h"
#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"

#include "mlir/IR/Builders.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_CANONICALIZESLOTSPASS
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

namespace {
struct CanonicalizeSlotsPass
    : public mlir::cmask::impl::CanonicalizeSlotsPassBase<
          CanonicalizeSlotsPass> {
  using Base::Base;

  void runOnOperation() override {
    SpecOp spec = getOperation();
    ::cmask::ExprContext ctx;
    llvm::SmallVector<const ::cmask::Pred *, 4> guards;
    llvm::SmallVector<RegionOp, 4> regions;
    for (RegionOp region : spec.getRegions()) {
      if (!region.hasSlots()) {
        region.emitOpError() << "has no slots yet; run cmask-extract-intervals "
                                "before cmask-canonicalize-slots";
        return signalPassFailure();
      }
      guards.push_back(importPredicate(ctx, region.getGuard()));
      regions.push_back(region);
    }
    Builder b(spec.getContext());
    int64_t maxSlots = 0;
    for (auto [index, region] : llvm::enumerate(regions)) {
      auto facts = ::cmask::regionFacts(ctx, guards, index);
      bool complete = true;
      auto slots = ::cmask::canonicalizeSlots(
          ctx, importSlots(ctx, region.getRule()), facts, maxProofs, &complete);
      if (!complete)
        region.emitWarning()
            << "canonicalization stopped after "
            << static_cast<uint64_t>(maxProofs) << " proofs: the region's "
            << slots.size()
            << " slots are exact but K may not be minimal (raise "
               "max-proofs, or split the rule)";
      exportSlots(region.getRule(), slots, region.getLoc());
      region.setNumSlotsAttr(b.getI64IntegerAttr(slots.size()));
      maxSlots = std::max<int64_t>(maxSlots, slots.size());
    }
    spec.setNumSlotsAttr(b.getI64IntegerAttr(maxSlots));
  }
};
} // namespace
