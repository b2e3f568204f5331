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
#include "cmask_runtime/DescriptorLayout.h"

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

#include <tuple>

using namespace mlir;
using namespace mlir::cmask;

namespace abi = ::cmask::abi;

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
                  static_cast<int64_t>(part.spec.getNumSlots().value_or(0))};
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
      auto layout = abi::TileLayout::of(numSeqs, totalRows, maxCols, t.shape.q,
                                        t.shape.k);
      if (layout.keyTiles > abi::kMaxKeyTiles)
        return "a sequence of " + std::to_string(maxCols) + " columns has " +
               std::to_string(layout.keyTiles) + " column tiles of " +
               t.shape.str() + "; descriptor entries hold at most " +
               std::to_string(abi::kMaxKeyTiles);
      words += layout.words(numSeqs, k, t.shape.q);
    }
    return std::nullopt;
  };
  int64_t totalQ = 0, totalK = 0, maxQ = 0, maxK = 0;
  for (const auto &seq : batch.sequences) {
    totalQ += seq.presentQ();
    totalK += seq.presentK();
    maxQ = std::max(maxQ, seq.presentQ());
    maxK = std::max(maxK, seq.presentK());
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
  // The windows (position, whole length) when any sequence has one.
  std::vector<int32_t> windowQ, windowK;
  bool hasQ = false, hasK = false;
  for (const auto &seq : batch.sequences) {
    cuQ.push_back(cuQ.back() + static_cast<int32_t>(seq.presentQ()));
    cuK.push_back(cuK.back() + static_cast<int32_t>(seq.presentK()));
    hasQ |= seq.qWindow.has_value();
    hasK |= seq.kWindow.has_value();
    for (auto [window, length, out] :
         {std::tuple{&seq.qWindow, seq.qLen, &windowQ},
          std::tuple{&seq.kWindow, seq.kLen, &windowK}}) {
      out->push_back(*window ? static_cast<int32_t>((*window)->first) : 0);
      out->push_back(static_cast<int32_t>(length));
    }
  }
  if (!hasQ)
    windowQ.clear();
  if (!hasK)
    windowK.clear();
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
  auto rowDir = runDirection(rows, cuQ, cuK, windowQ, windowK, metaArgs,
                             &error->ptr, /*checked=*/true, loc);
  if (failed(rowDir))
    return failure();
  result.rows = std::move(*rowDir);
  if (columns) {
    // The column spec's rows are the keys: q and k trade places.
    auto colDir = runDirection(*columns, cuK, cuQ, windowK, windowQ, metaArgs,
                               &error->ptr, /*checked=*/true, loc);
    if (failed(colDir))
      return failure();
    result.columns = std::move(*colDir);
  }
  result.errorFlags = error->data[0];
  return result;
}

FailureOr<DirectionDescriptor> HostTwin::runDirection(
    const Direction &dir, llvm::ArrayRef<int32_t> cuRows,
    llvm::ArrayRef<int32_t> cuCols, llvm::ArrayRef<int32_t> windowRows,
    llvm::ArrayRef<int32_t> windowCols, llvm::ArrayRef<void *> metadataArgs,
    void *errorArg, bool checked, Location loc) {
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

  // Row phase (and the metadata check): the item count, then the row group
  // (cmask_runtime/KernelABI.h) as the JIT-compiled wrappers take it, a
  // window after the cu_seqlens it belongs to.
  namespace head = abi::row_group_head;
  namespace tail = abi::row_group_tail;
  int64_t count = totalRows;
  Buffer *cuRowBuf = buffer({cuRows.begin(), cuRows.end()});
  Buffer *cuColBuf = buffer({cuCols.begin(), cuCols.end()});
  auto withWindow = [&](llvm::ArrayRef<int32_t> cu,
                        llvm::ArrayRef<int32_t> window) {
    std::vector<int32_t> out(cu.begin(), cu.end());
    out.insert(out.end(), window.begin(), window.end());
    return buffer(std::move(out));
  };
  Buffer *cuRowWin = withWindow(cuRows, windowRows);
  Buffer *cuColWin = withWindow(cuCols, windowCols);
  size_t tableSize = totalRows * numSlots * 2;
  Buffer *intervals = buffer(std::vector<int32_t>(tableSize, -1));
  Buffer *merged = buffer(std::vector<int32_t>(tableSize, -1));
  void *headArgs[head::kNumArgs], *tailArgs[tail::kNumArgs];
  headArgs[head::NumSeqs] = &numSeqs;
  headArgs[head::CuSeqlensRows] = &cuRowWin->ptr;
  headArgs[head::CuSeqlensCols] = &cuColWin->ptr;
  tailArgs[tail::Intervals] = &intervals->ptr;
  tailArgs[tail::Merged] = &merged->ptr;
  tailArgs[tail::Error] = errorArg;
  llvm::SmallVector<void *> args = {&count};
  args.append(std::begin(headArgs), std::end(headArgs));
  args.append(metadataArgs.begin(), metadataArgs.end());
  args.append(std::begin(tailArgs), std::end(tailArgs));
  if (failed(invoke(names.rows, args)))
    return failure();
  count = numSeqs;
  if (checked && failed(invoke(names.check, args)))
    return failure();

  DirectionDescriptor result;
  result.intervals = intervals->data;
  namespace group = abi::tile_group;
  for (const PreprocessNames::Tiles &t : names.tiles) {
    // Sized from the batch's bounds as Artifact::createDescriptor sizes them.
    auto layout =
        abi::TileLayout::of(numSeqs, totalRows, maxCols, t.shape.q, t.shape.k);
    if (layout.keyTiles > abi::kMaxKeyTiles)
      return emitError(loc)
             << "a sequence of " << maxCols << " columns has "
             << layout.keyTiles << " column tiles of " << t.shape.str()
             << "; descriptor entries hold at most " << abi::kMaxKeyTiles;
    int32_t words = layout.nktWords;
    // The tile group: the item count, then its arguments in ABI order.
    int64_t items = 0;
    llvm::SmallVector<void *> targs(1 + group::kNumArgs, nullptr);
    llvm::SmallVector<Buffer *> tileBuffers(group::kNumArgs, nullptr);
    targs[0] = &items;
    for (int arg = 0; arg < group::kNumArgs; ++arg)
      if (int64_t n = layout.elements(arg, numSeqs, numSlots, t.shape.q);
          n >= 0) {
        tileBuffers[arg] = buffer(std::vector<int32_t>(n, -1));
        targs[1 + arg] = &tileBuffers[arg]->ptr;
      }
    targs[1 + group::NumSeqs] = &numSeqs;
    targs[1 + group::NktWords] = &words;
    targs[1 + group::CuSeqlensRows] = &cuRowBuf->ptr;
    targs[1 + group::CuSeqlensCols] = &cuColBuf->ptr;
    targs[1 + group::Intervals] = &intervals->ptr;
    targs[1 + group::Merged] = &merged->ptr;
    targs[1 + group::Error] = errorArg;
    auto data = [&](int arg) -> std::vector<int32_t> & {
      return tileBuffers[arg]->data;
    };
    abi::PhaseSizes sizes{numSeqs, totalRows, numSlots, t.shape.q, layout};
    for (auto [name, phase] :
         {std::pair<const std::string *, abi::Phase>{&t.seqs, abi::Phase::Seqs},
          {&t.envinit, abi::Phase::EnvInit},
          {&t.env, abi::Phase::Env},
          {&t.tiles, abi::Phase::Tiles},
          {&t.pack, abi::Phase::Pack},
          {&t.count, abi::Phase::Count},
          {&t.scan, abi::Phase::Scan},
          {&t.fill, abi::Phase::Fill}}) {
      items = abi::phaseItems(phase, sizes);
      if (failed(invoke(*name, targs)))
        return failure();
    }
    TileDescriptor d;
    d.shape = t.shape;
    d.numQTiles = data(group::Counts)[0];
    d.nktWords = words;
    d.qTileSeq = data(group::QTileSeq);
    d.qTileBase = data(group::QTileBase);
    d.tileState = data(group::TileState);
    d.tileOffsets = data(group::TileOffsets);
    d.tileOrder = data(group::TileOrder);
    const std::vector<int32_t> &entries = data(group::TileEntries);
    int64_t numEntries =
        d.numQTiles > 0 ? data(group::TileOffsets)[d.numQTiles] : 0;
    d.tileEntries.assign(entries.begin(), entries.begin() + numEntries);
    const std::vector<int32_t> &windows = data(group::TileWindows);
    d.tileWindows.assign(windows.begin(), windows.begin() + numEntries);
    const std::vector<int32_t> &partials = data(group::PartialCounts);
    d.partialCounts.assign(partials.begin(), partials.begin() + d.numQTiles);
    result.tiles.push_back(std::move(d));
  }
  return result;
}
