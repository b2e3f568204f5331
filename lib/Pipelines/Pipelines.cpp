//===- Pipelines.cpp - cmask-spec-to-gpu, -gpu-to-nvvm, -gpu-to-binary ----===//
//
// The registered pipelines of Pipelines.h: thin wrappers over the passes and
// the GPU lowering's builders (LowerToPTX.h).
//
//===----------------------------------------------------------------------===//

#include "cmask/Pipelines/Pipelines.h"

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"
#include "cmask/Conversion/Passes.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/Target/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::cmask;

namespace {
/// The options of convert-cmask-to-gpu, with its defaults, and whether to
/// derive the column direction first (cmask-derive-columns).
struct SpecToGPUOptions : public PassPipelineOptions<SpecToGPUOptions> {
  ConvertCMaskToGPUPassOptions defaults;
  Option<bool> columns{
      *this, "columns",
      llvm::cl::desc(
          "Derive the column direction as cmask-translate does "
          "(cmask-derive-columns; false: none, the backward checks the row "
          "intervals)"),
      llvm::cl::init(true)};
  Option<std::string> tileShapes{
      *this, "tile-shapes",
      llvm::cl::desc("Tile shapes of the row direction, QxK, comma separated"),
      llvm::cl::init(defaults.tileShapes)};
  Option<std::string> columnTileShapes{
      *this, "column-tile-shapes",
      llvm::cl::desc(
          "Tile shapes of the column direction, KxQ (default: tile-shapes)"),
      llvm::cl::init(defaults.columnTileShapes)};
  Option<std::string> attentionHeadDims{
      *this, "attention-head-dims",
      llvm::cl::desc("Head dimensions of the attention kernels (64, 128), "
                     "comma separated; empty: none"),
      llvm::cl::init(defaults.attentionHeadDims)};
  Option<std::string> attentionDtypes{
      *this, "attention-dtypes",
      llvm::cl::desc("Element types of the attention kernels (bf16, f16), "
                     "comma separated"),
      llvm::cl::init(defaults.attentionDtypes)};
  Option<bool> attentionBackward{
      *this, "attention-backward",
      llvm::cl::desc("Also build the backward kernels"),
      llvm::cl::init(defaults.attentionBackward)};
};

/// The NVVM target's options, shared by both lowerings.
template <typename Derived>
struct TargetOptions : public PassPipelineOptions<Derived> {
  GPUTarget defaults;
  mlir::detail::PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("The GPU to compile for"),
      llvm::cl::init(defaults.chip)};
  mlir::detail::PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (a PTX version)"),
      llvm::cl::init(defaults.features)};
  mlir::detail::PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level (0-3)"),
      llvm::cl::init(defaults.optLevel)};

  GPUTarget get() const { return {chip, features, optLevel}; }
};
struct GPUToNVVMOptions : public TargetOptions<GPUToNVVMOptions> {};
struct GPUToBinaryOptions : public TargetOptions<GPUToBinaryOptions> {
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary's format: isa (PTX), bin, fatbin"),
      llvm::cl::init("isa")};
};
} // namespace

void mlir::cmask::buildSpecToGPUPipeline(
    OpPassManager &pm, bool columns,
    const ConvertCMaskToGPUPassOptions &options) {
  if (columns)
    pm.addPass(createDeriveColumnsPass());
  buildLowerToIntervalsPipeline(pm);
  pm.addPass(createConvertCMaskToGPUPass(options));
}

void mlir::cmask::registerCMaskGPUPipelines() {
  PassPipelineRegistration<SpecToGPUOptions>(
      "cmask-spec-to-gpu",
      "MaskSpecs to their preprocess and attention kernels in the GPU "
      "dialects (cmask-derive-columns, cmask-lower-to-intervals, "
      "convert-cmask-to-gpu)",
      [](OpPassManager &pm, const SpecToGPUOptions &options) {
        ConvertCMaskToGPUPassOptions pass;
        pass.tileShapes = options.tileShapes;
        pass.columnTileShapes = options.columnTileShapes;
        pass.attentionHeadDims = options.attentionHeadDims;
        pass.attentionDtypes = options.attentionDtypes;
        pass.attentionBackward = options.attentionBackward;
        buildSpecToGPUPipeline(pm, options.columns, pass);
      });
  PassPipelineRegistration<GPUToNVVMOptions>(
      "cmask-gpu-to-nvvm",
      "cmask's GPU kernels to NVVM and LLVM (the stock GPU-to-NVVM stages, "
      "then cmask-mark-tensor-map-args)",
      [](OpPassManager &pm, const GPUToNVVMOptions &options) {
        buildGPUToNVVMPipeline(pm, options.get());
      });
  PassPipelineRegistration<GPUToBinaryOptions>(
      "cmask-gpu-to-binary",
      "cmask's GPU kernels to one gpu.binary per gpu.module "
      "(cmask-gpu-to-nvvm, then gpu-module-to-binary)",
      [](OpPassManager &pm, const GPUToBinaryOptions &options) {
        buildGPUToBinaryPipeline(pm, options.get(), options.format);
      });
}
