//===- Pipelines.cpp - cmask-lower-to-intervals ---------------------------===//
//
// The registered pipeline from a MaskSpec to its canonical interval slots.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void cmask::buildLowerToIntervalsPipeline(
    OpPassManager &pm, const NormalizeDNFPassOptions &normalize) {
  pm.addPass(createRequireSpecPass());
  OpPassManager &spec = pm.nest<SpecOp>();
  spec.addPass(createNormalizeDNFPass(normalize));
  spec.addPass(createExtractIntervalsPass());
  spec.addPass(createCanonicalizeSlotsPass());
}

void cmask::registerCMaskPipelines() {
  PassPipelineRegistration<>(
      "cmask-lower-to-intervals",
      "Lower every MaskSpec to canonical interval slots (normalize-dnf, "
      "extract-intervals, canonicalize-slots)",
      [](OpPassManager &pm) { buildLowerToIntervalsPipeline(pm); });
}
