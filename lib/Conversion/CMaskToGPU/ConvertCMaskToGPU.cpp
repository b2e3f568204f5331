//===- ConvertCMaskToGPU.cpp - convert-cmask-to-gpu -----------------------===//
//
// The pass form of the GPU code: every spec in slot form, with its column
// spec `<spec>__columns` when the module holds one, becomes item functions
// and stage kernels in `gpu.module @cmask_preprocess` (Preprocess.h; the
// launch plan is recorded on the spec), and attention forward and backward
// kernels in `gpu.module @cmask_attention` (Attention.h).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/Passes.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"
#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Dialect/CMask/Transforms/Transpose.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_CONVERTCMASKTOGPUPASS
#include "cmask/Conversion/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

/// The plan as an attribute: its kernels in launch order as
/// {kernel = "...", stages = [[["rows", 0, -1], ...], ...]}.
static Attribute planAttr(Builder &b, const LaunchPlan &plan) {
  llvm::SmallVector<Attribute> kernels;
  for (const StageKernel &kernel : plan) {
    llvm::SmallVector<Attribute> stages;
    for (const ::cmask::abi::Stage &stage : kernel.stages) {
      llvm::SmallVector<Attribute> phases;
      for (const StageKernel::Item &item : stage)
        phases.push_back(b.getArrayAttr(
            {b.getStringAttr(::cmask::abi::stringify(item.phase)),
             b.getI64IntegerAttr(item.direction),
             b.getI64IntegerAttr(item.shape)}));
      stages.push_back(b.getArrayAttr(phases));
    }
    kernels.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("kernel", b.getStringAttr(kernel.name)),
         b.getNamedAttr("stages", b.getArrayAttr(stages))}));
  }
  return b.getArrayAttr(kernels);
}

namespace {
struct ConvertCMaskToGPUPass
    : public mlir::cmask::impl::ConvertCMaskToGPUPassBase<
          ConvertCMaskToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string bad;
    auto shapes = parseTileShapeList(tileShapes, bad);
    if (!shapes) {
      module.emitError() << "convert-cmask-to-gpu: tile-shapes: '" << bad
                         << "' is not QxK with positive integers";
      return signalPassFailure();
    }
    auto columnShapes = columnTileShapes.empty()
                            ? shapes
                            : parseTileShapeList(columnTileShapes, bad);
    if (!columnShapes) {
      module.emitError() << "convert-cmask-to-gpu: column-tile-shapes: '" << bad
                         << "' is not KxQ with positive integers";
      return signalPassFailure();
    }
    struct {
      llvm::SmallVector<int64_t> headDims;
      llvm::SmallVector<ElementType> dtypes;
    } attention;
    for (llvm::StringRef item : llvm::split(attentionHeadDims, ',')) {
      int64_t dim;
      if (item.trim().empty())
        continue;
      if (item.trim().getAsInteger(10, dim)) {
        module.emitError() << "convert-cmask-to-gpu: attention-head-dims: '"
                           << item << "' is not an integer";
        return signalPassFailure();
      }
      attention.headDims.push_back(dim);
    }
    for (llvm::StringRef item : llvm::split(attentionDtypes, ',')) {
      auto type = parseElementType(item.trim());
      if (!type) {
        module.emitError() << "convert-cmask-to-gpu: attention-dtypes: '"
                           << item << "' is not bf16 or f16";
        return signalPassFailure();
      }
      attention.dtypes.push_back(*type);
    }
    llvm::SmallVector<SpecOp> specs(module.getOps<SpecOp>());
    if (specs.empty()) {
      module.emitError() << "convert-cmask-to-gpu: no cmask.spec in the input";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    for (SpecOp spec : specs) {
      // A column spec is built with the spec it belongs to.
      if (spec.getSymName().ends_with("__columns") &&
          symbols.lookup(spec.getSymName().drop_back(strlen("__columns"))))
        continue;
      llvm::SmallVector<PreprocessPart> parts = {{spec, *shapes}};
      if (auto columns = symbols.lookup<SpecOp>(getColumnSpecName(spec)))
        parts.push_back({columns, *columnShapes});
      auto plan = buildGPUPreprocess(parts, module);
      if (failed(plan))
        return signalPassFailure();
      Builder b(module.getContext());
      spec->setAttr("cmask.preprocess_kernels", planAttr(b, *plan));
      if (attention.headDims.empty())
        continue;
      int64_t numSlots = std::max<int64_t>(1, spec.getNumSlots().value_or(0));
      auto variants = getAttentionVariants(
          *shapes, numSlots, attention.headDims, attention.dtypes);
      if (variants.empty()) {
        spec.emitError()
            << "convert-cmask-to-gpu: the attention kernels need a "
               "tile shape of 128 query rows and 64 or 128 keys "
               "(or attention-head-dims=\"\")";
        return signalPassFailure();
      }
      llvm::SmallVector<BackwardVariant> backward;
      if (attentionBackward) {
        std::string why;
        backward = getBackwardVariants(parts, attention.dtypes,
                                       attention.headDims, why);
        if (backward.empty())
          spec.emitWarning()
              << "convert-cmask-to-gpu: no backward kernels: " << why
              << " (or attention-backward=false)";
      }
      std::string prefix = ("cmask_" + spec.getSymName()).str();
      if (failed(buildAttentionKernels(module, prefix, variants, spec.getLoc(),
                                       backward)))
        return signalPassFailure();
      llvm::SmallVector<Attribute> names;
      for (const AttentionVariant &v : variants)
        names.push_back(b.getStringAttr(v.kernelName(prefix)));
      spec->setAttr("cmask.attention", b.getArrayAttr(names));
      if (backward.empty())
        continue;
      names.clear();
      for (const BackwardVariant &v : backward)
        names.push_back(b.getStringAttr(v.kernelName(prefix)));
      spec->setAttr("cmask.attention_backward", b.getArrayAttr(names));
    }
  }
};
} // namespace
