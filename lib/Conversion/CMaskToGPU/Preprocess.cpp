//===- Preprocess.cpp - The mask-specific preprocess ----------------------===//
//
// Builds a MaskSpec's preprocess (docs/descriptor.md) as item functions in
// scf form: the row phase (RowPhase.cpp), the metadata check
// (CheckPhase.cpp) and each tile shape's tile phases (TilePhases.cpp); for
// the CPU (the host twin) each wrapped in a loop over its items, for the GPU
// in stage kernels (PreprocessStages.cpp).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "KernelSignature.h"
#include "PreprocessPhases.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cmask;

/// Limits of the tile-list entry word (docs/descriptor.md).
static constexpr int64_t kMaxSlots = kMaxDescriptorSlots;

std::optional<llvm::SmallVector<TileShape>>
mlir::cmask::parseTileShapeList(llvm::StringRef text, std::string &bad) {
  llvm::SmallVector<TileShape> shapes;
  for (llvm::StringRef item : llvm::split(text, ',')) {
    auto [a, b] = item.trim().split('x');
    TileShape shape;
    if (a.getAsInteger(10, shape.q) || b.getAsInteger(10, shape.k) ||
        shape.q <= 0 || shape.k <= 0) {
      bad = item.str();
      return std::nullopt;
    }
    shapes.push_back(shape);
  }
  return shapes;
}

PreprocessNames
mlir::cmask::getPreprocessNames(SpecOp spec, llvm::ArrayRef<TileShape> shapes) {
  std::string base = ("cmask_" + spec.getSymName()).str();
  PreprocessNames names;
  names.rows = base + "_rows";
  names.check = base + "_check";
  for (const TileShape &shape : shapes) {
    std::string p = base + "_" + shape.str();
    names.tiles.push_back({shape, p, p + "_seqs", p + "_envinit", p + "_env",
                           p + "_tiles", p + "_pack", p + "_count", p + "_scan",
                           p + "_fill"});
  }
  return names;
}

std::vector<std::pair<std::string, ::cmask::abi::MetadataRole>>
mlir::cmask::getABIMetadata(SpecOp spec) {
  std::vector<std::pair<std::string, ::cmask::abi::MetadataRole>> out;
  for (MetadataOp m : spec.getMetadata()) {
    using Role = ::cmask::abi::MetadataRole;
    Role role = m.getRole() == MetadataRole::scalar         ? Role::Scalar
                : m.getRole() == MetadataRole::per_sequence ? Role::PerSequence
                                                            : Role::Offsets;
    out.push_back({m.getSymName().str(), role});
  }
  return out;
}

std::vector<::cmask::abi::NamedArg>
mlir::cmask::getStageKernelArgs(const StageKernel &kernel, SpecOp spec) {
  return ::cmask::abi::stageKernelArgs(kernel.stages, getABIMetadata(spec));
}

/// Adds `name`: for (item = 0; item < n; ++item) call(item, args...).
static void addHostWrapper(OpBuilder &b, Location loc, func::FuncOp item,
                           llvm::StringRef name) {
  llvm::SmallVector<Type> types(item.getFunctionType().getInputs());
  auto host = func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  host->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  OpBuilder::InsertionGuard guard(b);
  Block *body = host.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(b, loc, zero, body->getArgument(0), one);
  b.setInsertionPointToStart(loop.getBody());
  llvm::SmallVector<Value> args = {loop.getInductionVar()};
  for (BlockArgument arg : body->getArguments().drop_front())
    args.push_back(arg);
  func::CallOp::create(b, loc, item, args);
  b.setInsertionPointAfter(loop);
  func::ReturnOp::create(b, loc);
}

LogicalResult mlir::cmask::buildPreprocess(SpecOp spec, ModuleOp module,
                                           llvm::ArrayRef<TileShape> shapes,
                                           PreprocessTarget target) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                   memref::MemRefDialect, scf::SCFDialect>();
  // The module may live in another context than the spec (the host twin
  // JITs it in its own): build with a location of the module's context.
  Location loc = NameLoc::get(StringAttr::get(ctx, spec.getSymName()));
  if (!spec.getNumSlots())
    return spec.emitOpError()
           << "is not in slot form; run cmask-lower-to-intervals first";
  int64_t numSlots = *spec.getNumSlots();
  // Tile-list entries hold slot indices and counts in 7 bits.
  if (numSlots > kMaxSlots)
    return spec.emitOpError()
           << "has " << numSlots
           << " slots per row; the descriptor supports at "
           << "most " << kMaxSlots << " (split the rule into regions or narrow "
           << "its unions)";

  PreprocessNames names = getPreprocessNames(spec, shapes);
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  if (target == PreprocessTarget::GPU) {
    ctx->loadDialect<gpu::GPUDialect>();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    // One GPU module holds the kernels of every spec built into `module`
    // (the row and the column direction): one PTX file.
    auto gpuModule =
        module.lookupSymbol<gpu::GPUModuleOp>(preprocess::kGPUModuleName);
    if (!gpuModule)
      gpuModule = gpu::GPUModuleOp::create(b, loc, preprocess::kGPUModuleName);
    b.setInsertionPointToEnd(gpuModule.getBody());
  }
  // On the GPU, compilePreprocessToPTX wraps the item functions in stage
  // kernels.
  auto addEntry = [&](func::FuncOp item, llvm::StringRef name) {
    if (target == PreprocessTarget::CPU)
      addHostWrapper(b, loc, item, name);
  };

  FailureOr<func::FuncOp> rows =
      preprocess::buildRowItem(b, loc, spec, names.rows, numSlots, target);
  if (failed(rows))
    return failure();
  addEntry(*rows, names.rows);
  addEntry(preprocess::buildCheckItem(b, loc, spec, names.check, numSlots),
           names.check);

  for (const PreprocessNames::Tiles &t : names.tiles) {
    auto items = preprocess::buildTilePhases(b, loc, t.prefix, t.shape.q,
                                             t.shape.k, numSlots);
    for (auto [fn, host] :
         llvm::zip_equal(items, std::array<const std::string *, 8>{
                                    &t.seqs, &t.envinit, &t.env, &t.tiles,
                                    &t.pack, &t.count, &t.scan, &t.fill}))
      addEntry(fn, *host);
  }
  return success();
}
