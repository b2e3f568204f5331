//===- HostTwin.cpp - Run the preprocess on the CPU -----------------------===//
//
// --cmask-to-descriptor-json: compiles the spec, builds its preprocess
// (cmask/Conversion/CMaskToGPU/Preprocess.h), lowers it to the CPU, JITs it
// with the ExecutionEngine and prints what it computes for each batch of
// the --metadata file, in the format of --cmask-to-intervals-json, so that
// the tests compare the preprocess with the evaluator.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/HostTwin.h"

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/Support/TargetSelect.h"

using namespace mlir;
using namespace mlir::cmask;

/// Tile-list entries hold the k tile in 16 bits (docs/descriptor.md).
static constexpr int64_t kMaxKeyTiles = 1 << 16;

namespace {
/// An int32 buffer handed to the JIT-compiled code as memref<?xi32>.
struct Buffer {
  std::vector<int32_t> data;
  StridedMemRefType<int32_t, 1> desc;
  StridedMemRefType<int32_t, 1> *ptr = &desc;

  explicit Buffer(std::vector<int32_t> values) : data(std::move(values)) {
    if (data.empty())
      data.reserve(1);
    desc.basePtr = desc.data = data.data();
    desc.offset = 0;
    desc.sizes[0] = static_cast<int64_t>(data.size());
    desc.strides[0] = 1;
  }
};
} // namespace

FailureOr<std::unique_ptr<HostTwin>>
HostTwin::create(SpecOp source, llvm::ArrayRef<TileShape> shapes) {
  auto twin = std::unique_ptr<HostTwin>(new HostTwin());
  DialectRegistry registry;
  registry.insert<arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect, scf::SCFDialect, LLVM::LLVMDialect,
                  CMaskDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  twin->context = std::make_unique<MLIRContext>(registry);
  twin->context->loadAllAvailableDialects();

  // Compile a copy of the spec to slots.
  OwningOpRef<ModuleOp> specModule =
      ModuleOp::create(UnknownLoc::get(source.getContext()));
  specModule->getBody()->push_back(source->clone());
  PassManager pm(source.getContext(), ModuleOp::getOperationName());
  buildLowerToIntervalsPipeline(pm);
  if (failed(pm.run(*specModule)))
    return failure();
  SpecOp spec = *specModule->getOps<SpecOp>().begin();
  twin->numSlots = spec.getNumSlots().value_or(0);
  twin->names = getPreprocessNames(spec, shapes);
  for (MetadataOp m : spec.getMetadata())
    twin->metadata.push_back({m.getSymName().str(), m.getRole()});

  twin->module = ModuleOp::create(UnknownLoc::get(twin->context.get()));
  if (failed(buildPreprocess(spec, *twin->module, shapes)) ||
      failed(lowerPreprocessToLLVM(*twin->module)))
    return failure();

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions options;
  auto engine = ExecutionEngine::create(*twin->module, options);
  if (!engine)
    return emitError(source.getLoc())
           << "cannot JIT the preprocess: " << llvm::toString(engine.takeError());
  twin->engine = std::move(*engine);
  return twin;
}

HostTwin::~HostTwin() = default;

FailureOr<Descriptor> HostTwin::run(const BatchMetadata &batch, Location loc) {
  std::vector<int32_t> cuQ = {0}, cuK = {0};
  int64_t maxK = 0;
  for (const auto &seq : batch.sequences) {
    cuQ.push_back(cuQ.back() + static_cast<int32_t>(seq.qLen));
    cuK.push_back(cuK.back() + static_cast<int32_t>(seq.kLen));
    maxK = std::max(maxK, seq.kLen);
  }
  int64_t totalQ = cuQ.back();
  int32_t numSeqs = static_cast<int32_t>(batch.sequences.size());

  std::vector<std::unique_ptr<Buffer>> buffers;
  auto buffer = [&](std::vector<int32_t> values) {
    buffers.push_back(std::make_unique<Buffer>(std::move(values)));
    return buffers.back().get();
  };
  auto invoke = [&](const std::string &name,
                    llvm::MutableArrayRef<void *> args) -> LogicalResult {
    if (llvm::Error err = engine->invokePacked("_mlir_ciface_" + name, args))
      return emitError(loc) << "running " << name
                            << " failed: " << llvm::toString(std::move(err));
    return success();
  };

  // Row phase.
  std::vector<int32_t> scalars;
  scalars.reserve(metadata.size());
  int64_t count = totalQ;
  Buffer *cuQBuf = buffer(cuQ), *cuKBuf = buffer(cuK);
  llvm::SmallVector<void *> args = {&count, &numSeqs, &cuQBuf->ptr,
                                    &cuKBuf->ptr};
  for (const auto &[name, role] : metadata) {
    switch (role) {
    case MetadataRole::scalar:
      scalars.push_back(static_cast<int32_t>(batch.scalars.lookup(name)));
      args.push_back(&scalars.back());
      break;
    case MetadataRole::per_sequence: {
      const auto &v = batch.perSequence.find(name)->second;
      args.push_back(&buffer(std::vector<int32_t>(v.begin(), v.end()))->ptr);
      break;
    }
    case MetadataRole::offsets: {
      std::vector<int32_t> values, starts = {0};
      for (const auto &list : batch.offsets.find(name)->second) {
        values.insert(values.end(), list.begin(), list.end());
        starts.push_back(static_cast<int32_t>(values.size()));
      }
      args.push_back(&buffer(std::move(values))->ptr);
      args.push_back(&buffer(std::move(starts))->ptr);
      break;
    }
    }
  }
  size_t tableSize = totalQ * numSlots * 2;
  Buffer *intervals = buffer(std::vector<int32_t>(tableSize, -1));
  Buffer *merged = buffer(std::vector<int32_t>(tableSize, -1));
  Buffer *error = buffer(std::vector<int32_t>(1, 0));
  args.push_back(&intervals->ptr);
  args.push_back(&merged->ptr);
  args.push_back(&error->ptr);
  if (failed(invoke(names.rows, args)))
    return failure();
  count = numSeqs;
  if (failed(invoke(names.check, args)))
    return failure();

  Descriptor result;
  result.intervals = intervals->data;
  result.errorFlags = error->data[0];
  for (const PreprocessNames::Tiles &t : names.tiles) {
    // Sized from the batch's bounds as Artifact::createDescriptor sizes them
    // (total_q / TQ + B q tiles; 16 W >= k tiles of the longest sequence).
    int64_t nqtMax = (totalQ + t.shape.q - 1) / t.shape.q + numSeqs;
    int64_t nkt = (maxK + t.shape.k - 1) / t.shape.k;
    if (nkt > kMaxKeyTiles)
      return emitError(loc) << "a sequence of " << maxK << " keys has " << nkt
                            << " key tiles of " << t.shape.str()
                            << "; descriptor entries hold at most "
                            << kMaxKeyTiles;
    int32_t words = static_cast<int32_t>(std::max<int64_t>(1, (nkt + 15) / 16));
    int64_t stride = int64_t(words) * 16;
    Buffer *qTileBase = buffer(std::vector<int32_t>(numSeqs + 1, -1));
    Buffer *qTileSeq = buffer(std::vector<int32_t>(nqtMax, -1));
    Buffer *counts = buffer(std::vector<int32_t>(nqtMax + 1, -1));
    Buffer *state = buffer(std::vector<int32_t>(nqtMax * words, -1));
    Buffer *info = buffer(std::vector<int32_t>(nqtMax * stride, -1));
    Buffer *offsets = buffer(std::vector<int32_t>(nqtMax + 1, -1));
    Buffer *entries = buffer(std::vector<int32_t>(nqtMax * stride, -1));
    Buffer *order = buffer(std::vector<int32_t>(nqtMax, -1));
    Buffer *envelopes = buffer(std::vector<int32_t>(nqtMax * numSlots * 4, -1));
    Buffer *wordPrefix = buffer(std::vector<int32_t>(nqtMax * words, -1));
    int64_t items = 0;
    llvm::SmallVector<void *> targs = {
        &items,          &numSeqs,     &words,           &cuQBuf->ptr,
        &cuKBuf->ptr,    &intervals->ptr, &merged->ptr,  &qTileBase->ptr,
        &qTileSeq->ptr,  &counts->ptr, &state->ptr,      &info->ptr,
        &offsets->ptr,   &entries->ptr, &order->ptr,     &envelopes->ptr,
        &wordPrefix->ptr, &error->ptr};
    for (auto [name, n] : {std::pair<const std::string *, int64_t>{&t.seqs, 1},
                           {&t.envinit, nqtMax * numSlots},
                           {&t.env, nqtMax * numSlots * ((t.shape.q + 15) / 16)},
                           {&t.tiles, nqtMax * stride},
                           {&t.pack, nqtMax * words},
                           {&t.count, nqtMax},
                           {&t.scan, nqtMax + 1},
                           {&t.fill, nqtMax * stride}}) {
      items = n;
      if (failed(invoke(*name, targs)))
        return failure();
    }
    TileDescriptor d;
    d.shape = t.shape;
    d.numQTiles = counts->data[0];
    d.nktWords = words;
    d.qTileSeq = qTileSeq->data;
    d.qTileBase = qTileBase->data;
    d.tileState = state->data;
    d.tileOffsets = offsets->data;
    d.tileOrder = order->data;
    int64_t numEntries = d.numQTiles > 0 ? offsets->data[d.numQTiles] : 0;
    d.tileEntries.assign(entries->data.begin(),
                         entries->data.begin() + numEntries);
    result.tiles.push_back(std::move(d));
  }
  return result;
}
