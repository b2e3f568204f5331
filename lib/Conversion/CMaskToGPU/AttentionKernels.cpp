//===- AttentionKernels.cpp - The attention kernels of an artifact --------===//
//
// What the attention builders share: element types, the variants of a
// spec, the gpu.module holding every forward and backward kernel, their
// compilation to PTX, and each kernel's arguments as the kernel ABI lists
// them (cmask_runtime/KernelABI.h). The kernels themselves are built in
// AttentionForward.cpp and AttentionBackward.cpp.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

using namespace mlir;
using namespace mlir::cmask;

llvm::StringRef mlir::cmask::stringifyElementType(ElementType type) {
  return type == ElementType::BF16 ? "bf16" : "f16";
}

std::optional<ElementType> mlir::cmask::parseElementType(llvm::StringRef text) {
  if (text == "bf16")
    return ElementType::BF16;
  if (text == "f16" || text == "fp16")
    return ElementType::F16;
  return std::nullopt;
}

llvm::SmallVector<AttentionVariant> mlir::cmask::getAttentionVariants(
    llvm::ArrayRef<TileShape> shapes, int64_t numSlots,
    llvm::ArrayRef<int64_t> headDims, llvm::ArrayRef<ElementType> dtypes) {
  llvm::SmallVector<AttentionVariant> variants;
  for (ElementType dtype : dtypes)
    for (int64_t headDim : headDims)
      for (const TileShape &tile : shapes)
        if (isAttentionTile(tile)) {
          variants.push_back({dtype, headDim, tile, numSlots});
          // The persistent schedule pays for many short work items (packed
          // documents, large batches of short sequences) at 128x128, where
          // it was measured (docs/performance.md).
          if (tile.k == 128)
            variants.push_back({dtype, headDim, tile, numSlots, true});
        }
  return variants;
}

llvm::SmallVector<BackwardVariant> mlir::cmask::getBackwardVariants(
    llvm::ArrayRef<PreprocessPart> parts, llvm::ArrayRef<ElementType> dtypes,
    llvm::ArrayRef<int64_t> headDims, std::string &why) {
  auto has = [](llvm::ArrayRef<TileShape> shapes, int64_t q, int64_t k) {
    return llvm::any_of(
        shapes, [&](const TileShape &t) { return t.q == q && t.k == k; });
  };
  auto slots = [](SpecOp spec) {
    return std::max<int64_t>(1, spec.getNumSlots().value_or(0));
  };
  llvm::ArrayRef<TileShape> rowShapes = parts.front().shapes;
  int64_t rowSlots = slots(parts.front().spec);
  int64_t columnSlots = rowSlots, rowTileK = 0;
  if (parts.size() > 1) {
    // Key tiles of 128 walking query tiles of 64.
    if (!has(parts[1].shapes, 128, 64)) {
      why = "the column tile shapes lack 128x64";
      return {};
    }
    columnSlots = slots(parts[1].spec);
  } else if (has(rowShapes, 128, 128) || has(rowShapes, 128, 64)) {
    rowTileK = has(rowShapes, 128, 128) ? 128 : 64;
  } else {
    why =
        "no column direction, and the row tile shapes lack 128x128 and 128x64";
    return {};
  }
  llvm::SmallVector<BackwardVariant> variants;
  for (ElementType type : dtypes)
    for (int64_t dim : headDims)
      variants.push_back({type, dim, columnSlots, rowSlots, rowTileK});
  return variants;
}

std::vector<std::pair<std::string, std::vector<::cmask::abi::NamedArg>>>
mlir::cmask::getAttentionKernelABI(llvm::StringRef prefix,
                                   llvm::ArrayRef<AttentionVariant> variants,
                                   llvm::ArrayRef<BackwardVariant> backward) {
  namespace abi = ::cmask::abi;
  std::vector<std::pair<std::string, std::vector<abi::NamedArg>>> out;
  for (const AttentionVariant &v : variants)
    out.push_back(
        {v.kernelName(prefix), abi::toList(abi::forward::kSignature)});
  for (const BackwardVariant &v : backward) {
    std::string name = v.kernelName(prefix);
    out.push_back({name + "_pre", abi::toList(abi::backward_pre::kSignature)});
    out.push_back({name, abi::toList(v.rowTileK ? abi::backward_rows::kSignature
                                                : abi::backward::kSignature)});
    out.push_back({name + "_dq", abi::toList(abi::backward_dq::kSignature)});
    out.push_back(
        {name + "_dqr", abi::toList(abi::backward_dq_rows::kSignature)});
  }
  return out;
}

LogicalResult
mlir::cmask::buildAttentionKernels(ModuleOp module, llvm::StringRef prefix,
                                   llvm::ArrayRef<AttentionVariant> variants,
                                   Location loc,
                                   llvm::ArrayRef<BackwardVariant> backward) {
  for (const AttentionVariant &variant : variants)
    if (auto why = checkAttentionVariant(variant))
      return emitError(loc) << "attention forward: unsupported " << *why;
  for (const BackwardVariant &variant : backward)
    if (auto why = checkBackwardVariant(variant))
      return emitError(loc) << "attention backward: unsupported " << *why;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto gpuModule =
      SymbolTable(module).lookup<gpu::GPUModuleOp>("cmask_attention");
  if (!gpuModule)
    gpuModule = gpu::GPUModuleOp::create(b, loc, "cmask_attention");
  for (const AttentionVariant &variant : variants)
    buildAttentionForward(gpuModule, variant.kernelName(prefix), variant, loc);
  for (const BackwardVariant &variant : backward)
    buildAttentionBackward(gpuModule, variant.kernelName(prefix), variant, loc);
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());
  return success();
}

std::optional<std::string> mlir::cmask::compileAttentionPTX(
    llvm::StringRef prefix, llvm::ArrayRef<AttentionVariant> variants,
    llvm::StringRef chip, llvm::ArrayRef<BackwardVariant> backward,
    std::string &error) {
  DialectRegistry registry;
  registerGPULowering(registry);
  // One thread per module: the caller runs modules side by side.
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  Location here = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(here);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    error += (error.empty() ? "" : "; ") + diag.str();
    return success();
  });
  if (failed(buildAttentionKernels(*module, prefix, variants, here, backward)))
    return std::nullopt;
  auto ptx = lowerToPTX(*module, chip, here);
  if (failed(ptx))
    return std::nullopt;
  return std::move(*ptx);
}

FailureOr<std::string>
mlir::cmask::compileAttentionToPTX(llvm::StringRef prefix,
                                   llvm::ArrayRef<AttentionVariant> variants,
                                   llvm::StringRef chip, Location loc,
                                   llvm::ArrayRef<BackwardVariant> backward) {
  std::string error;
  if (auto ptx = compileAttentionPTX(prefix, variants, chip, backward, error))
    return std::move(*ptx);
  return emitError(loc) << error;
}
