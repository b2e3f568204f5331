//===- Artifact.cpp - cmask-translate --cmask-to-artifact -o DIR ----------===//
//
// Writes what the runtime loads (docs/artifact.md): preprocess.ptx, the
// attention modules (sm_90a: attention_<dtype>_d<head dim>.ptx, compiled
// side by side on a thread each), their cubins when ptxas is found (PATH,
// $CUDA_HOME/bin, /usr/local/cuda/bin), and manifest.json (kernels and
// their parameter ABI, metadata schema with roles, K and tile shapes of the
// row and the column direction, arch, a hash of the spec).
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/Artifact.h"

#include "cmask/Conversion/CMaskToGPU/Attention.h"
#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Target/Columns.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cmask;

/// ptxas from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin.
static std::optional<std::string> findPtxas() {
  if (auto p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  llvm::SmallVector<std::string> dirs;
  if (const char *home = getenv("CUDA_HOME"))
    dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const std::string &dir : dirs)
    if (auto p = llvm::sys::findProgramByName("ptxas", {dir}))
      return *p;
  return std::nullopt;
}

/// Runs `args` (args[0]: the program) with its stdout and stderr captured
/// into `output` (trimmed): the exit code, or -1 with `error` set where it
/// could not run (no temporary file for the output included).
static int runCaptured(llvm::ArrayRef<llvm::StringRef> args,
                       std::string &output, std::string &error) {
  llvm::SmallString<128> log;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("cmask-ptxas", "txt", log)) {
    error = "no temporary file for ptxas's output: " + ec.message();
    return -1;
  }
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  int rc = llvm::sys::ExecuteAndWait(args[0], args, std::nullopt, redirects, 0,
                                     0, &error);
  if (auto text = llvm::MemoryBuffer::getFile(log))
    output = (*text)->getBuffer().trim().str();
  llvm::sys::fs::remove(log);
  return rc;
}

/// Whether `ptxas` takes --split-compile (CUDA 12.4 on; its --help says).
static bool ptxasSplits(llvm::StringRef ptxas) {
  std::string help, error;
  return runCaptured({ptxas, "--help"}, help, error) == 0 &&
         llvm::StringRef(help).contains("--split-compile");
}

/// ptxas -arch ARCH PTX -o CUBIN [--split-compile=THREADS] [EXTRA...]: ""
/// or what went wrong (with ptxas's own message); what ptxas prints on
/// success (warnings) passes through to stderr.
static std::string assemble(llvm::StringRef ptxas, llvm::StringRef arch,
                            llvm::StringRef ptx, llvm::StringRef cubin,
                            unsigned threads = 1,
                            llvm::ArrayRef<std::string> extra = {}) {
  std::string split = "--split-compile=" + std::to_string(threads);
  llvm::SmallVector<llvm::StringRef> args = {ptxas, "-arch", arch,
                                             ptx,   "-o",    cubin};
  if (threads > 1)
    args.push_back(split);
  args.append(extra.begin(), extra.end());
  std::string said, error;
  int rc = runCaptured(args, said, error);
  if (rc != 0)
    return "ptxas failed on " + ptx.str() + " (exit " + std::to_string(rc) +
           ")" + (error.empty() ? "" : " " + error) +
           (said.empty() ? "" : ": " + said);
  if (!said.empty())
    llvm::errs() << said << "\n";
  return "";
}

/// Writes `contents` to `path`: "" or what went wrong.
static std::string writeFile(llvm::StringRef path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return "cannot write " + path.str() + ": " + ec.message();
  os << contents;
  return "";
}

static LogicalResult writeFile(Location loc, llvm::StringRef path,
                               llvm::StringRef contents) {
  if (std::string error = writeFile(path, contents); !error.empty())
    return emitError(loc) << error;
  return success();
}

namespace {
/// One attention module of an artifact: the forward and backward kernels
/// of one element type and head dimension, compiled on a thread of its own
/// into `<stem>.ptx` (and `<stem>.cubin`). The grouping depends on the
/// options only, so an artifact is the same whatever the thread count.
struct AttentionModule {
  std::string stem;
  llvm::SmallVector<AttentionVariant> forward;
  llvm::SmallVector<BackwardVariant> backward;
  std::string error; ///< set by the thread that compiled it
};
} // namespace

static llvm::SmallVector<AttentionModule>
groupAttentionModules(llvm::ArrayRef<AttentionVariant> forward,
                      llvm::ArrayRef<BackwardVariant> backward,
                      const AttentionOptions &attention) {
  llvm::SmallVector<AttentionModule> modules;
  for (ElementType dtype : attention.dtypes)
    for (int64_t headDim : attention.headDims) {
      AttentionModule m;
      m.stem = ("attention_" + stringifyElementType(dtype) + "_d" +
                llvm::Twine(headDim))
                   .str();
      for (const AttentionVariant &v : forward)
        if (v.dtype == dtype && v.headDim == headDim)
          m.forward.push_back(v);
      for (const BackwardVariant &v : backward)
        if (v.dtype == dtype && v.headDim == headDim)
          m.backward.push_back(v);
      if (!m.forward.empty() || !m.backward.empty())
        modules.push_back(std::move(m));
    }
  return modules;
}

/// The manifest entries of one direction's tile shapes.
static llvm::json::Array tileShapesJSON(llvm::ArrayRef<TileShape> shapes) {
  llvm::json::Array tiles;
  for (const TileShape &t : shapes)
    tiles.push_back(
        llvm::json::Object{{"name", t.str()}, {"q", t.q}, {"k", t.k}});
  return tiles;
}

/// An argument list as the manifest's "kernel_abi" writes it: [[name,
/// kind], ...].
static llvm::json::Array argsJSON(llvm::ArrayRef<::cmask::abi::NamedArg> args) {
  llvm::json::Array out;
  for (const ::cmask::abi::NamedArg &arg : args)
    out.push_back(
        llvm::json::Array{arg.name, ::cmask::abi::stringify(arg.kind)});
  return out;
}

/// The launch plan: its kernels in launch order, each with its stages, a
/// stage's phases as [phase, direction, shape].
static llvm::json::Array planJSON(const LaunchPlan &plan) {
  llvm::json::Array kernels;
  for (const StageKernel &kernel : plan) {
    llvm::json::Array stages;
    for (const ::cmask::abi::Stage &stage : kernel.stages) {
      llvm::json::Array phases;
      for (const StageKernel::Item &item : stage)
        phases.push_back(llvm::json::Array{::cmask::abi::stringify(item.phase),
                                           item.direction, item.shape});
      stages.push_back(std::move(phases));
    }
    kernels.push_back(llvm::json::Object{{"kernel", kernel.name},
                                         {"stages", std::move(stages)}});
  }
  return kernels;
}

LogicalResult mlir::cmask::writeArtifact(SpecOp spec, llvm::StringRef dir,
                                         llvm::ArrayRef<TileShape> shapes,
                                         llvm::ArrayRef<TileShape> columnShapes,
                                         llvm::StringRef arch,
                                         const AttentionOptions &attention,
                                         bool verbose) {
  Location loc = spec.getLoc();
  // Hash of the spec as written, before lowering.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    spec->print(os, OpPrintingFlags().printGenericOpForm());
  }
  std::string hash =
      llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(text)),
                  /*LowerCase=*/true);

  auto compiled = compileSpec(spec, shapes, columnShapes);
  if (failed(compiled))
    return failure();
  SpecOp lowered = compiled->rows;
  ColumnDirection *columns = &compiled->columns;
  int64_t columnSlots =
      columns->spec ? columns->spec.getNumSlots().value_or(0) : 0;
  if (verbose) {
    llvm::errs() << "cmask: compiling @" << lowered.getSymName()
                 << " (K = " << lowered.getNumSlots().value_or(0)
                 << "; columns: " << stringifyColumnMode(columns->mode);
    if (columns->spec)
      llvm::errs() << ", K = " << columnSlots;
    llvm::errs() << ") for " << arch << "\n";
    if (columns->mode != ColumnMode::Derived)
      llvm::errs() << "cmask: the transposed rule does not lower ("
                   << columns->reason << ")"
                   << (columns->mode == ColumnMode::Rows
                           ? "; the backward pass will check row intervals"
                           : "; the spec is symmetric: columns = rows")
                   << "\n";
  }
  llvm::SmallVector<AttentionVariant> variants;
  TileShape defaultTile;
  bool attentionShapes = llvm::any_of(shapes, isAttentionTile);
  if (attention.enabled && !attentionShapes && verbose)
    llvm::errs() << "cmask: no attention kernels: none of the tile shapes is "
                    "128x64 or 128x128\n";
  if (attention.enabled && attentionShapes) {
    int64_t numSlots = std::max<int64_t>(1, lowered.getNumSlots().value_or(0));
    auto selected = selectAttentionVariants(
        loc, shapes, numSlots, attention.headDims, attention.dtypes);
    if (failed(selected))
      return failure();
    variants = std::move(*selected);
    defaultTile = attention.defaultTile.value_or(
        lowered.getNumSlots().value_or(0) > 2 ? TileShape{128, 64}
                                              : TileShape{128, 128});
    if (llvm::none_of(variants, [&](const AttentionVariant &v) {
          return v.tile.q == defaultTile.q && v.tile.k == defaultTile.k;
        }))
      defaultTile = variants.front().tile;
    if (attention.defaultTile && (defaultTile.q != attention.defaultTile->q ||
                                  defaultTile.k != attention.defaultTile->k))
      return emitError(loc)
             << "--attention-tile=" << attention.defaultTile->str()
             << " is not among the attention tile shapes";
  }
  llvm::SmallVector<BackwardVariant> backward;
  if (!variants.empty()) {
    if (verbose)
      llvm::errs() << "cmask: building " << variants.size()
                   << " attention forward kernels\n";
    std::string noBackward;
    backward = getBackwardVariants(compiled->parts, attention.dtypes,
                                   attention.headDims, noBackward);
    if (verbose && !backward.empty())
      llvm::errs() << "cmask: building " << backward.size()
                   << " attention backward kernels"
                   << (columns->spec ? "" : " (row intervals)") << "\n";
    if (verbose && backward.empty())
      llvm::errs() << "cmask: no attention backward kernels: " << noBackward
                   << "\n";
  }

  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return emitError(loc) << "cannot create " << dir << ": " << ec.message();
  auto ptxas = findPtxas();
  if (!ptxas && verbose)
    llvm::errs() << "cmask: ptxas not found; the artifact has PTX only (the "
                    "runtime JIT-compiles it)\n";
  bool haveCubin = ptxas.has_value();
  std::string prefix = ("cmask_" + lowered.getSymName()).str();

  // The attention modules, each on a thread of the pool (its own context,
  // its PTX and its ptxas run), while this thread builds the preprocess.
  llvm::SmallVector<AttentionModule> modules =
      groupAttentionModules(variants, backward, attention);
  unsigned threads =
      llvm::hardware_concurrency(attention.jobs).compute_thread_count();
  if (verbose && modules.size() > 1)
    llvm::errs() << "cmask: compiling " << modules.size()
                 << " attention modules on "
                 << std::min<size_t>(threads, modules.size()) << " threads\n";
  // ptxas's own threads share what the modules leave over.
  unsigned ptxasThreads = ptxas && !modules.empty() &&
                                  threads > modules.size() &&
                                  ptxasSplits(*ptxas)
                              ? threads / static_cast<unsigned>(modules.size())
                              : 1;
  llvm::DefaultThreadPool pool(llvm::hardware_concurrency(attention.jobs));
  std::string arches = arch.str(), dirs = dir.str();
  for (AttentionModule &m : modules)
    pool.async([&m, &prefix, &arches, &dirs, &ptxas, ptxasThreads, &attention] {
      auto text =
          compileAttentionPTX(prefix, m.forward, arches, m.backward, m.error);
      if (!text)
        return;
      llvm::SmallString<256> ptxPath(dirs), cubinPath(dirs);
      llvm::sys::path::append(ptxPath, m.stem + ".ptx");
      llvm::sys::path::append(cubinPath, m.stem + ".cubin");
      m.error = writeFile(ptxPath, *text);
      if (m.error.empty() && ptxas)
        m.error = assemble(*ptxas, arches, ptxPath, cubinPath, ptxasThreads,
                           attention.ptxasOptions);
    });

  auto ptx = compilePreprocessToPTX(compiled->parts, arch);
  if (failed(ptx))
    return failure();
  llvm::SmallString<256> ptxPath(dir), cubinPath(dir), manifestPath(dir);
  llvm::sys::path::append(ptxPath, "preprocess.ptx");
  llvm::sys::path::append(cubinPath, "preprocess.cubin");
  llvm::sys::path::append(manifestPath, "manifest.json");
  if (failed(writeFile(loc, ptxPath, ptx->ptx)))
    return failure();
  if (ptxas)
    if (std::string error = assemble(*ptxas, arch, ptxPath, cubinPath);
        !error.empty())
      return emitError(loc) << error;
  pool.wait();
  for (const AttentionModule &m : modules)
    if (!m.error.empty())
      return emitError(loc) << "attention module " << m.stem << ": " << m.error;

  // Every kernel's arguments (cmask_runtime/KernelABI.h): the runtime
  // refuses an artifact whose lists differ from its own.
  llvm::json::Object kernelABI;
  for (const StageKernel &kernel : ptx->plan)
    kernelABI[kernel.name] = argsJSON(getStageKernelArgs(kernel, lowered));

  // The attention kernels (sm_90a only), each naming its module.
  llvm::json::Value attentionJSON = nullptr;
  if (!variants.empty()) {
    // The deterministic dQ pass (`<kernel>_dqr`) walks the row direction's
    // 128x64 tiles.
    bool rowTile = llvm::any_of(
        shapes, [](const TileShape &t) { return t.q == 128 && t.k == 64; });
    llvm::json::Array kernels, moduleFiles;
    for (auto [index, m] : llvm::enumerate(modules)) {
      llvm::json::Object files{{"ptx", m.stem + ".ptx"}};
      if (ptxas)
        files["cubin"] = m.stem + ".cubin";
      moduleFiles.push_back(std::move(files));
      for (const AttentionVariant &v : m.forward)
        kernels.push_back(llvm::json::Object{
            {"kernel", v.kernelName(prefix)},
            {"pass", "forward"},
            {"module", static_cast<int64_t>(index)},
            {"dtype", stringifyElementType(v.dtype)},
            {"head_dim", v.headDim},
            {"tile_shape", v.tile.str()},
            {"schedule", v.persistent ? "persistent" : "grid"},
            {"threads", AttentionVariant::kThreads},
            {"shared_bytes", v.sharedBytes()},
            {"k_stages", v.kStages()},
            {"v_stages", v.vStages()}});
      for (const BackwardVariant &v : m.backward) {
        // tile_shape: the column shape walked, or (row intervals) the row
        // shape whose tiles the main kernel lists.
        llvm::json::Object kernel{
            {"kernel", v.kernelName(prefix)},
            {"pass", "backward"},
            {"module", static_cast<int64_t>(index)},
            {"dtype", stringifyElementType(v.dtype)},
            {"head_dim", v.headDim},
            {"tile_shape",
             v.rowTileK ? TileShape{128, v.rowTileK}.str() : "128x64"},
            {"threads", AttentionVariant::kThreads},
            {"shared_bytes", v.sharedBytes()},
            {"stages", 2},
            // The main kernel and _dq wait for the grid before them
            // (BackwardWalk::buildWalk, BackwardRowwise.cpp).
            {"programmatic_launch", true}};
        if (v.rowTileK) {
          kernel["intervals"] = "rows";
          kernel["max_seqlen_q"] = 64 * v.rowListCapacity();
        }
        if (rowTile)
          kernel["dq_rows_tile_shape"] = "128x64";
        kernels.push_back(std::move(kernel));
      }
    }
    for (auto &[name, args] : getAttentionKernelABI(prefix, variants, backward))
      kernelABI[name] = argsJSON(args);
    attentionJSON = llvm::json::Object{
        {"default_tile_shape", defaultTile.str()},
        // "runtime": the compiler's default, which a call naming no tile
        // may trade for 128x128 (rt::chooseSquareTiles); "fixed":
        // --attention-tile.
        {"tile_choice", attention.defaultTile ? "fixed" : "runtime"},
        {"kernels", std::move(kernels)},
        {"modules", std::move(moduleFiles)}};
  }

  llvm::json::Array metadata;
  for (MetadataOp m : lowered.getMetadata())
    metadata.push_back(
        llvm::json::Object{{"name", m.getSymName()},
                           {"role", stringifyMetadataRole(m.getRole())}});
  llvm::json::Object columnsJSON{{"mode", stringifyColumnMode(columns->mode)}};
  if (columns->mode != ColumnMode::Derived)
    columnsJSON["reason"] = columns->reason;
  if (columns->spec) {
    columnsJSON["spec"] = columns->spec.getSymName();
    columnsJSON["num_slots"] = columnSlots;
    columnsJSON["tile_shapes"] = tileShapesJSON(columnShapes);
  }
  llvm::json::Object files{{"ptx", "preprocess.ptx"}};
  if (haveCubin)
    files["cubin"] = "preprocess.cubin";
  llvm::json::Object manifest{
      {"format", ::cmask::abi::kManifestFormat},
      {"spec", lowered.getSymName()},
      {"spec_sha256", hash},
      {"arch", arch},
      {"num_slots", lowered.getNumSlots().value_or(0)},
      {"metadata", std::move(metadata)},
      {"tile_shapes", tileShapesJSON(shapes)},
      {"preprocess_kernels", planJSON(ptx->plan)},
      {"default_tile_shape", shapes.front().str()},
      {"columns", std::move(columnsJSON)},
      {"attention", std::move(attentionJSON)},
      {"kernel_abi", llvm::json::Object{{"version", ::cmask::abi::kVersion},
                                        {"kernels", std::move(kernelABI)}}},
      {"files", std::move(files)}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  if (failed(writeFile(loc, manifestPath, json)))
    return failure();
  if (verbose) {
    llvm::errs() << "cmask: wrote " << dir << "/{preprocess.ptx"
                 << (haveCubin ? ", preprocess.cubin" : "");
    for (const AttentionModule &m : modules)
      llvm::errs() << ", " << m.stem << ".ptx"
                   << (haveCubin ? ", " + m.stem + ".cubin" : "");
    llvm::errs() << ", manifest.json}\n";
  }
  return success();
}

FailureOr<llvm::SmallVector<AttentionVariant>>
mlir::cmask::selectAttentionVariants(Location loc,
                                     llvm::ArrayRef<TileShape> shapes,
                                     int64_t numSlots,
                                     llvm::ArrayRef<int64_t> headDims,
                                     llvm::ArrayRef<ElementType> dtypes) {
  auto variants = getAttentionVariants(shapes, numSlots, headDims, dtypes);
  if (variants.empty())
    return emitError(loc) << "the attention kernels need a tile shape of 128 "
                             "query rows and 64 or 128 keys among the tile "
                             "shapes (e.g. --tile-shapes=128x128,128x64)";
  for (const AttentionVariant &variant : variants)
    if (auto why = checkAttentionVariant(variant))
      return emitError(loc) << "attention forward: unsupported " << *why;
  return variants;
}

int mlir::cmask::artifactMain(int argc, char **argv) {
  std::string input, output, arch = "sm_90a", shapesText = "128x128,128x64",
                             columnShapesText, headDimsText = "64,128",
                             dtypesText = "bf16,f16", attentionTileText,
                             jobsText = "0", ptxasOptionsText;
  auto usage = [&](const llvm::Twine &why) {
    llvm::errs()
        << "cmask-translate: " << why
        << "\nusage: cmask-translate SPEC.mlir --cmask-to-artifact -o DIR "
           "[--arch=sm_90a|sm_80] [--tile-shapes=QxK,...] "
           "[--column-tile-shapes=KxQ,...] [--head-dims=64,128] "
           "[--dtypes=bf16,f16] [--attention-tile=QxK] [--jobs=N] "
           "[--ptxas-options='OPTS']\n";
    return 2;
  };
  for (int k = 1; k < argc; ++k) {
    llvm::StringRef arg = argv[k];
    if (arg == "--cmask-to-artifact" || arg == "-cmask-to-artifact" ||
        arg.starts_with("--mlir-"))
      continue;
    if (arg == "-o" && k + 1 < argc)
      output = argv[++k];
    else if (arg.consume_front("-o="))
      output = arg.str();
    else if (arg.consume_front("--arch=") || arg.consume_front("-arch="))
      arch = arg.str();
    else if (arg.consume_front("--tile-shapes=") ||
             arg.consume_front("-tile-shapes="))
      shapesText = arg.str();
    else if (arg.consume_front("--column-tile-shapes=") ||
             arg.consume_front("-column-tile-shapes="))
      columnShapesText = arg.str();
    else if (arg.consume_front("--head-dims=") ||
             arg.consume_front("-head-dims="))
      headDimsText = arg.str();
    else if (arg.consume_front("--dtypes=") || arg.consume_front("-dtypes="))
      dtypesText = arg.str();
    else if (arg.consume_front("--attention-tile=") ||
             arg.consume_front("-attention-tile="))
      attentionTileText = arg.str();
    else if (arg.consume_front("--jobs=") || arg.consume_front("-jobs="))
      jobsText = arg.str();
    else if (arg.consume_front("--ptxas-options=") ||
             arg.consume_front("-ptxas-options="))
      ptxasOptionsText = arg.str();
    else if (arg.starts_with("-"))
      return usage("unknown option '" + arg + "'");
    else if (input.empty())
      input = arg.str();
    else
      return usage("more than one input file");
  }
  if (input.empty() || output.empty())
    return usage("an input file and -o DIR are required");
  if (arch != "sm_90a" && arch != "sm_80")
    return usage("--arch=" + arch +
                 " is not supported; use sm_90a (Hopper) or sm_80 (Ampere)");
  llvm::SmallVector<TileShape> shapes, columnShapes;
  for (auto [option, text, out] :
       {std::tuple<const char *, llvm::StringRef,
                   llvm::SmallVector<TileShape> *>{"--tile-shapes", shapesText,
                                                   &shapes},
        {"--column-tile-shapes", columnShapesText, &columnShapes}}) {
    if (text.empty())
      continue;
    std::string bad;
    auto parsed = parseTileShapeList(text, bad);
    if (!parsed)
      return usage(llvm::Twine(option) + ": '" + bad +
                   "' is not AxB with positive integers");
    *out = std::move(*parsed);
  }
  if (shapes.empty())
    return usage("--tile-shapes: give at least one QxK shape");
  if (columnShapes.empty()) // key tiles x query tiles, as the rows' shapes
    columnShapes = shapes;
  AttentionOptions attention;
  attention.enabled = arch == "sm_90a";
  if (llvm::StringRef(jobsText).getAsInteger(10, attention.jobs))
    return usage("--jobs: '" + jobsText +
                 "' is not a thread count (0: every hardware thread)");
  llvm::SmallVector<llvm::StringRef> ptxasOptions;
  llvm::StringRef(ptxasOptionsText)
      .split(ptxasOptions, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef option : ptxasOptions) {
    if (option == "-o" || option.starts_with("-arch") ||
        option.starts_with("--gpu-name") || option.starts_with("--output"))
      return usage("--ptxas-options: '" + option +
                   "' is set by cmask-translate (--arch, -o)");
    attention.ptxasOptions.push_back(option.str());
  }
  attention.headDims.clear();
  for (llvm::StringRef item : llvm::split(headDimsText, ',')) {
    int64_t dim;
    if (item.trim().getAsInteger(10, dim))
      return usage("--head-dims: '" + item + "' is not an integer");
    attention.headDims.push_back(dim);
  }
  attention.dtypes.clear();
  for (llvm::StringRef item : llvm::split(dtypesText, ',')) {
    auto type = parseElementType(item.trim());
    if (!type)
      return usage("--dtypes: '" + item +
                   "' is not an element type (bf16, f16)");
    attention.dtypes.push_back(*type);
  }
  if (!attentionTileText.empty()) {
    std::string bad;
    auto parsed = parseTileShapeList(attentionTileText, bad);
    if (!parsed || parsed->size() != 1)
      return usage("--attention-tile: '" + attentionTileText +
                   "' is not one QxK shape");
    attention.defaultTile = parsed->front();
  }

  DialectRegistry registry;
  registry.insert<CMaskDialect>();
  MLIRContext context(registry);
  // A located error about a MaskSpec is one message, not a dump of the op.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<Operation *> op =
      parseSourceFile(input, sourceMgr, ParserConfig(&context));
  if (!op)
    return 1;
  llvm::SmallVector<SpecOp> specs;
  op->walk([&](SpecOp spec) { specs.push_back(spec); });
  if (specs.size() != 1) {
    emitError(op->getLoc()) << "expected exactly one cmask.spec in the input, "
                               "found "
                            << specs.size();
    return 1;
  }
  return failed(writeArtifact(specs.front(), output, shapes, columnShapes, arch,
                              attention, /*verbose=*/true))
             ? 1
             : 0;
}
