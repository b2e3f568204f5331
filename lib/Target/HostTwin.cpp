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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
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
HostTwin::create(SpecOp source, llvm::ArrayRef<TileShape> shapes,
                 llvm::ArrayRef<TileShape> columnShapes) {
  auto twin = std::unique_ptr<HostTwin>(new HostTwin());
  DialectRegistry registry;
  registry.insert<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect,
                  scf::SCFDialect, LLVM::LLVMDialect, CMaskDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  twin->context = std::make_unique<MLIRContext>(registry);
  twin->context->loadAllAvailableDialects();

  // Compile a copy of the spec to slots, and its column direction.
  auto compiled = compileSpec(source, shapes, columnShapes);
  if (failed(compiled))
    return failure();
  twin->columnMode = compiled->columns.mode;
  for (MetadataOp m : compiled->rows.getMetadata())
    twin->metadata.push_back({m.getSymName().str(), m.getRole()});
  twin->module = ModuleOp::create(UnknownLoc::get(twin->context.get()));
  for (auto [d, part] : llvm::enumerate(compiled->parts)) {
    Direction dir{getPreprocessNames(part.spec, part.shapes),
                  part.spec.getNumSlots().value_or(0)};
    if (d == 0)
      twin->rows = std::move(dir);
    else
      twin->columns = std::move(dir);
    if (failed(buildPreprocess(part.spec, *twin->module, part.shapes)))
      return failure();
  }
  if (failed(lowerPreprocessToLLVM(*twin->module)))
    return failure();

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions options;
  auto engine = ExecutionEngine::create(*twin->module, options);
  if (!engine)
    return emitError(source.getLoc()) << "cannot JIT the preprocess: "
                                      << llvm::toString(engine.takeError());
  twin->engine = std::move(*engine);
  return twin;
}

HostTwin::~HostTwin() = default;

std::optional<std::string>
HostTwin::checkSize(const BatchMetadata &batch) const {
  int64_t numSeqs = static_cast<int64_t>(batch.sequences.size());
  int64_t words = 1; // the error flags
  // One direction: `totalRows` rows over at most `maxCols` columns.
  auto direction = [&](const Direction &dir, int64_t totalRows,
                       int64_t maxCols) -> std::optional<std::string> {
    int64_t k = dir.numSlots;
    words += 2 * totalRows * k * 2; // intervals, merged
    for (const PreprocessNames::Tiles &t : dir.names.tiles) {
      int64_t nqt = (totalRows + t.shape.q - 1) / t.shape.q + numSeqs;
      int64_t nkt = (maxCols + t.shape.k - 1) / t.shape.k;
      if (nkt > kMaxKeyTiles)
        return "a sequence of " + std::to_string(maxCols) + " columns has " +
               std::to_string(nkt) + " column tiles of " + t.shape.str() +
               "; descriptor entries hold at most " +
               std::to_string(kMaxKeyTiles);
      int64_t w = std::max<int64_t>(1, (nkt + 15) / 16), stride = 16 * w;
      // The buffers of runDirection, in its order.
      words += (numSeqs + 1) + nqt + (nqt + 1) + nqt * w + nqt * stride +
               (nqt + 1) + nqt * stride + nqt +
               nqt * k * getEnvelopeWords(t.shape.q) + nqt * w;
    }
    return std::nullopt;
  };
  int64_t totalQ = 0, totalK = 0, maxQ = 0, maxK = 0;
  for (const auto &seq : batch.sequences) {
    totalQ += seq.qLen;
    totalK += seq.kLen;
    maxQ = std::max(maxQ, seq.qLen);
    maxK = std::max(maxK, seq.kLen);
  }
  if (auto why = direction(rows, totalQ, maxK))
    return why;
  if (columns)
    if (auto why = direction(*columns, totalK, maxQ))
      return why;
  if (words > kMaxWords)
    return "the descriptor of this batch takes " + std::to_string(words) +
           " int32 words; the CPU twin builds at most " +
           std::to_string(kMaxWords) +
           " (use larger tile shapes or a smaller batch; "
           "docs/metadata-json.md, Limits)";
  return std::nullopt;
}

namespace {
/// The buffers of one run; they stay where they are while it lasts.
struct Buffers {
  std::vector<std::unique_ptr<Buffer>> owned;
  Buffer *operator()(std::vector<int32_t> values) {
    owned.push_back(std::make_unique<Buffer>(std::move(values)));
    return owned.back().get();
  }
};
} // namespace

FailureOr<Descriptor> HostTwin::run(const BatchMetadata &batch, Location loc) {
  if (std::optional<std::string> why = checkSize(batch))
    return emitError(loc) << *why;
  std::vector<int32_t> cuQ = {0}, cuK = {0};
  for (const auto &seq : batch.sequences) {
    cuQ.push_back(cuQ.back() + static_cast<int32_t>(seq.qLen));
    cuK.push_back(cuK.back() + static_cast<int32_t>(seq.kLen));
  }
  Buffers buffer;
  std::vector<int32_t> scalars;
  scalars.reserve(metadata.size());
  llvm::SmallVector<void *> metaArgs;
  for (const auto &[name, role] : metadata) {
    switch (role) {
    case MetadataRole::scalar:
      scalars.push_back(static_cast<int32_t>(batch.scalars.lookup(name)));
      metaArgs.push_back(&scalars.back());
      break;
    case MetadataRole::per_sequence: {
      const auto &v = batch.perSequence.find(name)->second;
      metaArgs.push_back(
          &buffer(std::vector<int32_t>(v.begin(), v.end()))->ptr);
      break;
    }
    case MetadataRole::offsets: {
      std::vector<int32_t> values, starts = {0};
      for (const auto &list : batch.offsets.find(name)->second) {
        values.insert(values.end(), list.begin(), list.end());
        starts.push_back(static_cast<int32_t>(values.size()));
      }
      metaArgs.push_back(&buffer(std::move(values))->ptr);
      metaArgs.push_back(&buffer(std::move(starts))->ptr);
      break;
    }
    }
  }
  Buffer *error = buffer(std::vector<int32_t>(1, 0));

  Descriptor result;
  auto rowDir = runDirection(rows, cuQ, cuK, metaArgs, &error->ptr,
                             /*checked=*/true, loc);
  if (failed(rowDir))
    return failure();
  result.rows = std::move(*rowDir);
  if (columns) {
    // The column spec's rows are the keys: q and k trade places.
    auto colDir = runDirection(*columns, cuK, cuQ, metaArgs, &error->ptr,
                               /*checked=*/true, loc);
    if (failed(colDir))
      return failure();
    result.columns = std::move(*colDir);
  }
  result.errorFlags = error->data[0];
  return result;
}

FailureOr<DirectionDescriptor>
HostTwin::runDirection(const Direction &dir, llvm::ArrayRef<int32_t> cuRows,
                       llvm::ArrayRef<int32_t> cuCols,
                       llvm::ArrayRef<void *> metadataArgs, void *errorArg,
                       bool checked, Location loc) {
  const PreprocessNames &names = dir.names;
  int64_t numSlots = dir.numSlots;
  int32_t numSeqs = static_cast<int32_t>(cuRows.size()) - 1;
  int64_t totalRows = cuRows.back(), maxCols = 0;
  for (int32_t b = 0; b < numSeqs; ++b)
    maxCols = std::max<int64_t>(maxCols, cuCols[b + 1] - cuCols[b]);
  Buffers buffer;
  auto invoke = [&](const std::string &name,
                    llvm::MutableArrayRef<void *> args) -> LogicalResult {
    if (llvm::Error err = engine->invokePacked("_mlir_ciface_" + name, args))
      return emitError(loc) << "running " << name
                            << " failed: " << llvm::toString(std::move(err));
    return success();
  };

  // Row phase (and the metadata check).
  int64_t count = totalRows;
  Buffer *cuRowBuf = buffer({cuRows.begin(), cuRows.end()});
  Buffer *cuColBuf = buffer({cuCols.begin(), cuCols.end()});
  llvm::SmallVector<void *> args = {&count, &numSeqs, &cuRowBuf->ptr,
                                    &cuColBuf->ptr};
  args.append(metadataArgs.begin(), metadataArgs.end());
  size_t tableSize = totalRows * numSlots * 2;
  Buffer *intervals = buffer(std::vector<int32_t>(tableSize, -1));
  Buffer *merged = buffer(std::vector<int32_t>(tableSize, -1));
  args.push_back(&intervals->ptr);
  args.push_back(&merged->ptr);
  args.push_back(errorArg);
  if (failed(invoke(names.rows, args)))
    return failure();
  count = numSeqs;
  if (checked && failed(invoke(names.check, args)))
    return failure();

  DirectionDescriptor result;
  result.intervals = intervals->data;
  for (const PreprocessNames::Tiles &t : names.tiles) {
    // Sized from the batch's bounds as Artifact::createDescriptor sizes them
    // (total rows / TQ + B row tiles; 16 W >= column tiles of the longest
    // sequence).
    int64_t nqtMax = (totalRows + t.shape.q - 1) / t.shape.q + numSeqs;
    int64_t nkt = (maxCols + t.shape.k - 1) / t.shape.k;
    if (nkt > kMaxKeyTiles)
      return emitError(loc)
             << "a sequence of " << maxCols << " columns has " << nkt
             << " column tiles of " << t.shape.str()
             << "; descriptor entries hold at most " << kMaxKeyTiles;
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
    Buffer *envelopes = buffer(std::vector<int32_t>(
        nqtMax * numSlots * getEnvelopeWords(t.shape.q), -1));
    Buffer *wordPrefix = buffer(std::vector<int32_t>(nqtMax * words, -1));
    int64_t items = 0;
    llvm::SmallVector<void *> targs = {
        &items,           &numSeqs,        &words,       &cuRowBuf->ptr,
        &cuColBuf->ptr,   &intervals->ptr, &merged->ptr, &qTileBase->ptr,
        &qTileSeq->ptr,   &counts->ptr,    &state->ptr,  &info->ptr,
        &offsets->ptr,    &entries->ptr,   &order->ptr,  &envelopes->ptr,
        &wordPrefix->ptr, errorArg};
    for (auto [name, n] :
         {std::pair<const std::string *, int64_t>{&t.seqs, 1},
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
