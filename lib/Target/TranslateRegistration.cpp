//===- TranslateRegistration.cpp - cmask-translate JSON evaluators --------===//
//
// --cmask-to-intervals-json: compile the spec (cmask-lower-to-intervals) and
//   print every row's slots evaluated on the metadata file.
// --cmask-to-dense-json: the oracle; evaluate the original rule element by
//   element and print the mask.
// --cmask-to-descriptor-json: run the preprocess's CPU lowering (the host
//   twin) and print the interval table it builds, like the intervals mode.
// Formats: docs/metadata-json.md.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"
#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Dialect/CMask/IR/CMaskDialect.h"
#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/Target/Artifact.h"
#include "cmask/Target/Columns.h"
#include "cmask/Target/Evaluator.h"
#include "cmask/Target/HostTwin.h"
#include "cmask/Target/MetadataFile.h"
#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/Digest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::cmask;

static llvm::cl::opt<std::string> metadataPath(
    "metadata",
    llvm::cl::desc("JSON metadata file for --cmask-to-intervals-json, "
                   "--cmask-to-dense-json and --cmask-to-descriptor-json "
                   "(docs/metadata-json.md)"),
    llvm::cl::value_desc("file"), llvm::cl::init(""));

static llvm::cl::list<std::string> tileShapes(
    "tile-shapes",
    llvm::cl::desc("Tile shapes (QxK) of --cmask-to-descriptor-json, e.g. "
                   "128x128,128x64"),
    llvm::cl::CommaSeparated);

static llvm::cl::list<std::string> columnTileShapes(
    "column-tile-shapes",
    llvm::cl::desc("Tile shapes (KxQ: key rows by query columns) of the "
                   "column direction of --cmask-to-descriptor-json; default: "
                   "the --tile-shapes"),
    llvm::cl::CommaSeparated);

static llvm::cl::opt<bool> descriptorDigest(
    "descriptor-digest",
    llvm::cl::desc("With --cmask-to-descriptor-json, print per batch only a "
                   "digest of the descriptor (for large batches)"),
    llvm::cl::init(false));

/// The digest of a descriptor, as the GPU tools compute it
/// (cmask_runtime/Digest.h).
static std::string digestOf(const Descriptor &d) {
  ::cmask::rt::DescriptorDigest h;
  for (const DirectionDescriptor *dir :
       {&d.rows, d.columns ? &*d.columns : nullptr}) {
    if (!dir)
      continue;
    h.intervals(dir->intervals.data(), dir->intervals.size());
    for (const TileDescriptor &t : dir->tiles)
      h.tiles(static_cast<int32_t>(t.numQTiles),
              static_cast<int32_t>(t.nktWords), t.qTileSeq.data(),
              t.tileState.data(), t.tileOffsets.data(), t.tileEntries.data(),
              t.tileEntries.size(), t.tileOrder.data());
  }
  return h.hex();
}

/// The shapes of `option` (--tile-shapes or --column-tile-shapes), or
/// `fallback` when it is not given.
static FailureOr<llvm::SmallVector<TileShape>>
parseTileShapes(Location loc, const llvm::cl::list<std::string> &option,
                llvm::ArrayRef<TileShape> fallback) {
  llvm::SmallVector<TileShape> shapes;
  if (!option.empty()) {
    std::string bad;
    auto parsed = parseTileShapeList(llvm::join(option, ","), bad);
    if (!parsed)
      return emitError(loc) << "--" << option.ArgStr << ": '" << bad
                            << "' is not AxB with positive integers";
    shapes = std::move(*parsed);
  }
  if (shapes.empty())
    shapes.assign(fallback.begin(), fallback.end());
  return shapes;
}

/// The --tile-shapes, default 128x128 and 128x64.
static FailureOr<llvm::SmallVector<TileShape>> parseTileShapes(Location loc) {
  return parseTileShapes(loc, tileShapes, {{128, 128}, {128, 64}});
}

/// Prints the tile descriptor of one shape: states per global q tile as a
/// string of '0' (empty), '1' (partial), '2' (full) over its sequence's k
/// tiles, the CSR lists with entries decoded as [ktile, state, k0, nslots],
/// and the order.
static void printTiles(llvm::json::OStream &json, const TileDescriptor &d,
                       const BatchMetadata &batch) {
  json.attributeObject(d.shape.str(), [&] {
    json.attribute("num_q_tiles", d.numQTiles);
    json.attributeArray("q_tile_seq", [&] {
      for (int64_t g = 0; g < d.numQTiles; ++g)
        json.value(d.qTileSeq[g]);
    });
    json.attributeArray("states", [&] {
      for (int64_t g = 0; g < d.numQTiles; ++g) {
        int64_t kLen = batch.sequences[d.qTileSeq[g]].presentK();
        int64_t nkt = (kLen + d.shape.k - 1) / d.shape.k;
        std::string row;
        for (int64_t t = 0; t < nkt; ++t)
          row += static_cast<char>(
              '0' + ::cmask::abi::tileState(&d.tileState[g * d.nktWords], t));
        json.value(row);
      }
    });
    json.attributeArray("offsets", [&] {
      for (int64_t g = 0; g <= d.numQTiles; ++g)
        json.value(d.tileOffsets[g]);
    });
    json.attributeArray("entries", [&] {
      for (int32_t word : d.tileEntries)
        json.array([&] {
          ::cmask::abi::TileEntry e =
              ::cmask::abi::decodeTileEntry(static_cast<uint32_t>(word));
          json.value(e.tile);
          json.value(e.state);
          json.value(e.firstSlot);
          json.value(e.slotCount);
        });
    });
    json.attributeArray("partials", [&] {
      for (int32_t n : d.partialCounts)
        json.value(n);
    });
    json.attributeArray("windows", [&] {
      for (int32_t word : d.tileWindows)
        json.array([&] {
          for (int64_t w = 0; w < ::cmask::abi::kWindowGroups; ++w) {
            ::cmask::abi::TileWindow win =
                ::cmask::abi::decodeTileWindow(static_cast<uint32_t>(word), w);
            json.value(win.lo);
            json.value(win.hi);
          }
        });
    });
    json.attributeArray("order", [&] {
      for (int64_t g = 0; g < d.numQTiles; ++g)
        json.value(d.tileOrder[g]);
    });
  });
}

/// Prints the column direction: its mode, K, every key column's slots (the
/// query rows that see it) and its tiles (key tiles over query tiles).
static void printColumns(llvm::json::OStream &json, const HostTwin &twin,
                         const Descriptor &d, const BatchMetadata &batch) {
  json.attributeObject("columns", [&] {
    json.attribute("mode", stringifyColumnMode(twin.getColumnMode()));
    if (!d.columns)
      return;
    int64_t numSlots = twin.getNumColumnSlots();
    BatchMetadata swapped = batch;
    for (auto &seq : swapped.sequences) {
      std::swap(seq.qLen, seq.kLen);
      std::swap(seq.qWindow, seq.kWindow);
    }
    json.attribute("num_slots", numSlots);
    json.attributeArray("sequences", [&] {
      const int32_t *at = d.columns->intervals.data();
      for (const auto &seq : swapped.sequences)
        json.object([&] {
          json.attributeArray("rows", [&] {
            for (int64_t j = 0; j < seq.presentQ(); ++j, at += 2 * numSlots)
              json.object([&] {
                json.attributeArray("slots", [&] {
                  for (int64_t k = 0; k < numSlots; ++k)
                    json.array([&] {
                      json.value(at[2 * k]);
                      json.value(at[2 * k + 1]);
                    });
                });
              });
          });
        });
    });
    json.attributeObject("tiles", [&] {
      for (const TileDescriptor &t : d.columns->tiles)
        printTiles(json, t, swapped);
    });
  });
}

/// The one spec of the input. Its diagnostics are one located message each:
/// mlirTranslateMain prints the op on every diagnostic whatever
/// --mlir-print-op-on-diagnostic says (cmask-opt honours it).
static FailureOr<SpecOp> getSingleSpec(Operation *op) {
  op->getContext()->printOpOnDiagnostic(false);
  SmallVector<SpecOp> specs;
  op->walk([&](SpecOp spec) { specs.push_back(spec); });
  if (specs.size() != 1)
    return emitError(op->getLoc())
           << "expected exactly one cmask.spec in the input, found "
           << specs.size();
  return specs.front();
}

namespace {
enum class Mode { Intervals, Dense, Descriptor };
} // namespace

static LogicalResult evaluateToJSON(Operation *op, llvm::raw_ostream &os,
                                    Mode mode) {
  if (metadataPath.empty())
    return emitError(op->getLoc()) << "--metadata=FILE is required (see "
                                      "docs/metadata-json.md)";
  auto spec = getSingleSpec(op);
  if (failed(spec))
    return failure();
  // What each mode may be asked to do (docs/metadata-json.md, Limits).
  MetadataLimits limits;
  limits.maxRows = kMaxEvaluatedRows;
  limits.maxKeys = kMaxEvaluatedKeys;
  if (mode == Mode::Dense) {
    limits.maxElements = kMaxDenseElements;
    limits.what = "--cmask-to-dense-json";
  }
  limits.windows = mode == Mode::Descriptor;
  auto at = [&](FilePosition p) {
    return FileLineColLoc::get(op->getContext(), metadataPath, p.line,
                               p.column);
  };
  llvm::Expected<MetadataFile> file =
      readMetadataFile(metadataPath, *spec, limits);
  if (!file) {
    LogicalResult result = failure();
    llvm::handleAllErrors(file.takeError(), [&](const MetadataFileError &e) {
      result = emitError(at(e.getPosition())) << e.getMessage();
    });
    return result;
  }
  const std::vector<BatchMetadata> *batches = &file->batches;
  bool isArray = file->isArray;

  std::unique_ptr<HostTwin> twin;
  if (mode == Mode::Descriptor) {
    auto shapes = parseTileShapes(op->getLoc());
    if (failed(shapes))
      return failure();
    auto columnShapes =
        parseTileShapes(op->getLoc(), columnTileShapes, *shapes);
    if (failed(columnShapes))
      return failure();
    auto created = HostTwin::create(*spec, *shapes, *columnShapes);
    if (failed(created))
      return failure();
    twin = std::move(*created);
  }

  if (mode != Mode::Dense) {
    PassManager pm(op->getContext(), op->getName().getStringRef());
    buildLowerToIntervalsPipeline(pm);
    if (failed(pm.run(op)))
      return failure();
  }

  SpecOp s = *spec;
  SpecEvaluator eval(s);
  llvm::SmallVector<std::string, 4> names;
  for (RegionOp r : s.getRegions())
    names.push_back(r.getSymName().str());
  int64_t numSlots = s.getNumSlots().value_or(0);

  // Every batch within the limits before anything is printed.
  for (auto [batch, position] : llvm::zip_equal(*batches, file->positions)) {
    int64_t rows = 0;
    for (const auto &seq : batch.sequences)
      rows += seq.presentQ();
    if (mode != Mode::Dense && rows * numSlots > kMaxEvaluatedSlots)
      return emitError(at(position))
             << "this batch's " << rows << " query rows of " << numSlots
             << " slots pass the " << kMaxEvaluatedSlots
             << " slots cmask-translate evaluates per batch "
                "(docs/metadata-json.md, Limits)";
    if (twin)
      if (std::optional<std::string> why = twin->checkSize(batch))
        return emitError(at(position)) << *why;
  }

  llvm::json::OStream json(os);
  auto emitBatch = [&](const BatchMetadata &batch,
                       FilePosition position) -> LogicalResult {
    Descriptor descriptor;
    if (twin) {
      auto computed = twin->run(batch, at(position));
      if (failed(computed))
        return failure();
      descriptor = std::move(*computed);
    }
    const std::vector<int32_t> &table = descriptor.rows.intervals;
    int64_t firstRow = 0;
    if (twin && descriptorDigest) {
      json.object([&] {
        json.attribute("digest", digestOf(descriptor));
        json.attribute("error", descriptor.errorFlags);
      });
      return success();
    }
    json.object([&] {
      json.attribute("spec", s.getSymName());
      if (mode != Mode::Dense)
        json.attribute("num_slots", numSlots);
      json.attributeArray("regions", [&] {
        for (auto &n : names)
          json.value(n);
      });
      json.attributeArray("sequences", [&] {
        for (size_t b = 0; b < batch.sequences.size(); ++b) {
          const auto &seq = batch.sequences[b];
          eval.setSequence(batch, b);
          json.object([&] {
            json.attribute("q_len", seq.qLen);
            json.attribute("k_len", seq.kLen);
            // A window's present rows and keys (descriptor mode only).
            for (auto [key, window] : {std::pair{"q_window", &seq.qWindow},
                                       std::pair{"k_window", &seq.kWindow}})
              if (*window)
                json.attributeArray(key, [&] {
                  json.value((*window)->first);
                  json.value((*window)->second);
                });
            int64_t firstPresent = seq.qWindow ? seq.qWindow->first : 0;
            json.attributeArray("rows", [&] {
              llvm::SmallVector<std::pair<int64_t, int64_t>, 8> slots;
              std::string row;
              for (int64_t i = firstPresent; i < firstPresent + seq.presentQ();
                   ++i) {
                int region = eval.regionFor(i);
                if (mode == Mode::Dense) {
                  row.assign(seq.kLen, '0');
                  if (region >= 0)
                    for (int64_t j = 0; j < seq.kLen; ++j)
                      if (eval.sees(region, i, j))
                        row[j] = '1';
                  json.value(row);
                  continue;
                }
                slots.clear();
                if (twin) {
                  const int32_t *at =
                      table.data() +
                      (firstRow + i - firstPresent) * numSlots * 2;
                  for (int64_t k = 0; k < numSlots; ++k)
                    slots.push_back({at[2 * k], at[2 * k + 1]});
                } else if (region >= 0) {
                  eval.slots(region, i, slots);
                }
                slots.resize(numSlots, {0, 0});
                json.object([&] {
                  if (!twin)
                    json.attribute("region", region);
                  json.attributeArray("slots", [&] {
                    for (auto [lo, hi] : slots)
                      json.array([&] {
                        json.value(lo);
                        json.value(hi);
                      });
                  });
                });
              }
            });
          });
          firstRow += seq.presentQ();
        }
      });
      if (twin)
        json.attribute("error", descriptor.errorFlags);
      if (twin)
        json.attributeObject("tiles", [&] {
          for (const TileDescriptor &d : descriptor.rows.tiles)
            printTiles(json, d, batch);
        });
      if (twin)
        printColumns(json, *twin, descriptor, batch);
    });
    return success();
  };
  LogicalResult result = success();
  if (isArray)
    json.array([&] {
      for (auto [batch, position] : llvm::zip_equal(*batches, file->positions))
        if (failed(emitBatch(batch, position)))
          result = failure();
    });
  else
    result = emitBatch(batches->front(), file->positions.front());
  os << "\n";
  return result;
}

static llvm::cl::opt<std::string>
    targetArch("arch",
               llvm::cl::desc("GPU architecture of --cmask-to-ptx: sm_90a "
                              "(Hopper) or sm_80 (Ampere)"),
               llvm::cl::init("sm_90a"));

/// The input's single spec compiled with --tile-shapes and
/// --column-tile-shapes.
static FailureOr<CompiledSpec> compileWithTileShapes(Operation *op) {
  auto spec = getSingleSpec(op);
  if (failed(spec))
    return failure();
  auto shapes = parseTileShapes(op->getLoc());
  if (failed(shapes))
    return failure();
  auto columnShapes = parseTileShapes(op->getLoc(), columnTileShapes, *shapes);
  if (failed(columnShapes))
    return failure();
  return compileSpec(*spec, *shapes, *columnShapes);
}

/// --cmask-to-ptx: the spec's preprocess kernels as PTX.
static LogicalResult translateToPTX(Operation *op, llvm::raw_ostream &os) {
  if (targetArch != "sm_90a" && targetArch != "sm_80")
    return emitError(op->getLoc())
           << "--arch=" << targetArch
           << " is not supported; use sm_90a (Hopper) or sm_80 (Ampere)";
  auto compiled = compileWithTileShapes(op);
  if (failed(compiled))
    return failure();
  auto ptx = compilePreprocessToPTX(compiled->parts, targetArch);
  if (failed(ptx))
    return failure();
  os << ptx->ptx;
  return success();
}

static llvm::cl::list<int64_t>
    headDims("head-dims",
             llvm::cl::desc("Head dimensions of --cmask-to-attention-ptx "
                            "(64, 128; default 128)"),
             llvm::cl::CommaSeparated);

static llvm::cl::list<std::string>
    dtypes("dtypes",
           llvm::cl::desc("Element types of --cmask-to-attention-ptx (bf16, "
                          "f16; default bf16)"),
           llvm::cl::CommaSeparated);

static llvm::cl::opt<bool> backwardKernels(
    "backward",
    llvm::cl::desc(
        "With --cmask-to-attention-ptx, the backward kernels (from the "
        "column direction) instead of the forward"),
    llvm::cl::init(false));

/// --cmask-to-attention-ptx: the spec's attention kernels as PTX.
static LogicalResult translateToAttentionPTX(Operation *op,
                                             llvm::raw_ostream &os) {
  if (targetArch != "sm_90a")
    return emitError(op->getLoc())
           << "--arch=" << targetArch
           << ": the attention kernels need sm_90a (Hopper: TMA and wgmma)";
  auto compiled = compileWithTileShapes(op);
  if (failed(compiled))
    return failure();
  llvm::SmallVector<ElementType> types;
  for (const std::string &name : dtypes) {
    auto type = parseElementType(name);
    if (!type)
      return emitError(op->getLoc())
             << "--dtypes: '" << name << "' is not an element type (bf16, f16)";
    types.push_back(*type);
  }
  if (types.empty())
    types.push_back(ElementType::BF16);
  llvm::SmallVector<int64_t> dims(headDims.begin(), headDims.end());
  if (dims.empty())
    dims.push_back(128);
  std::string prefix = ("cmask_" + compiled->rows.getSymName()).str();
  if (backwardKernels) {
    std::string why;
    auto backward = getBackwardVariants(compiled->parts, types, dims, why);
    if (backward.empty())
      return emitError(op->getLoc()) << "--backward: " << why;
    auto ptx =
        compileAttentionToPTX(prefix, {}, targetArch, op->getLoc(), backward);
    if (failed(ptx))
      return failure();
    os << *ptx;
    return success();
  }
  auto variants = selectAttentionVariants(
      op->getLoc(), compiled->parts.front().shapes,
      std::max<int64_t>(1, compiled->rows.getNumSlots().value_or(0)), dims,
      types);
  if (failed(variants))
    return failure();
  auto ptx = compileAttentionToPTX(prefix, *variants, targetArch, op->getLoc());
  if (failed(ptx))
    return failure();
  os << *ptx;
  return success();
}

void mlir::cmask::registerCMaskEvaluatorTranslations() {
  auto registerDialects = [](DialectRegistry &registry) {
    registry.insert<CMaskDialect>();
  };
  TranslateFromMLIRRegistration intervals(
      "cmask-to-intervals-json",
      "Compile the MaskSpec and print every row's interval slots on the "
      "--metadata batch",
      [](Operation *op, llvm::raw_ostream &os) {
        return evaluateToJSON(op, os, Mode::Intervals);
      },
      registerDialects);
  TranslateFromMLIRRegistration descriptor(
      "cmask-to-descriptor-json",
      "Run the preprocess's CPU lowering (the host twin) on the --metadata "
      "batch and print the interval table it builds",
      [](Operation *op, llvm::raw_ostream &os) {
        return evaluateToJSON(op, os, Mode::Descriptor);
      },
      registerDialects);
  TranslateFromMLIRRegistration ptx(
      "cmask-to-ptx",
      "Compile the MaskSpec's preprocess kernels to PTX (--arch, "
      "--tile-shapes)",
      translateToPTX, registerDialects);
  TranslateFromMLIRRegistration attention(
      "cmask-to-attention-ptx",
      "Compile the attention forward kernels of the MaskSpec to PTX "
      "(--tile-shapes, --head-dims, --dtypes; sm_90a)",
      translateToAttentionPTX, registerDialects);
  TranslateFromMLIRRegistration dense(
      "cmask-to-dense-json",
      "Evaluate the MaskSpec's original rules element by element on the "
      "--metadata batch (the oracle)",
      [](Operation *op, llvm::raw_ostream &os) {
        return evaluateToJSON(op, os, Mode::Dense);
      },
      registerDialects);
}
