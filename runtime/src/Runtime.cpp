//===- Runtime.cpp - Load a cmask artifact and run its preprocess ---------===//

#include "cmask_runtime/Runtime.h"

#include "cmask_runtime/Json.h"

#include "Internal.h"

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace cmask::rt;

/// Tile-list entries hold the k tile in 16 bits (docs/descriptor.md).
static constexpr int64_t kMaxKeyTiles = 1 << 16;

Status cmask::rt::cudaError(const char *call, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  return Status::error(std::string(call) + ": " + (name ? name : "CUDA error") +
                       (text ? std::string(" (") + text + ")" : ""));
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

ScopedContext::ScopedContext(CUcontext context) {
  pushed = context && cuCtxPushCurrent(context) == CUDA_SUCCESS;
}

ScopedContext::~ScopedContext() {
  if (pushed) {
    CUcontext popped;
    cuCtxPopCurrent(&popped);
  }
}

void DeviceBuffer::release() {
  if (ptr) {
    ScopedContext scope(context);
    cuMemFree(ptr);
  }
  if (context)
    cuDevicePrimaryCtxRelease(device);
  ptr = 0;
  elements = 0;
  context = nullptr;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    ptr = other.ptr;
    elements = other.elements;
    context = other.context;
    device = other.device;
    other.ptr = 0;
    other.elements = 0;
    other.context = nullptr;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

Status DeviceBuffer::allocate(size_t n, CUdevice dev) {
  release();
  CMASK_CU(cuDevicePrimaryCtxRetain(&context, dev));
  device = dev;
  ScopedContext scope(context);
  CMASK_CU(cuMemAlloc(&ptr, std::max<size_t>(n, 1) * sizeof(int32_t)));
  elements = n;
  return Status::success();
}

Status DeviceBuffer::download(std::vector<int32_t> &out) const {
  ScopedContext scope(context);
  out.resize(elements);
  if (elements)
    CMASK_CU(cuMemcpyDtoH(out.data(), ptr, elements * sizeof(int32_t)));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Artifact
//===----------------------------------------------------------------------===//

Status cmask::rt::readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return Status::success();
}

static Status stringField(const json::Value &obj, const char *key,
                          std::string &out, const std::string &where) {
  const json::Value *v = obj.get(key);
  if (!v || !v->isString())
    return Status::error(where + ": missing string \"" + key + "\"");
  out = v->string;
  return Status::success();
}

/// The manifest format this runtime reads (docs/artifact.md).
static constexpr int64_t kManifestFormat = 4;

/// One direction's K and tile shapes from `obj` (the manifest, or its
/// "columns" object).
static Status loadDirection(const json::Value &obj, const std::string &where,
                            Artifact::Direction &out) {
  const json::Value *k = obj.get("num_slots");
  if (!k || !k->isInt())
    return Status::error(where + ": missing integer \"num_slots\"");
  out.numSlots = k->integer;
  const json::Value *tiles = obj.get("tile_shapes");
  if (!tiles || !tiles->isArray() || tiles->array.empty())
    return Status::error(where + ": missing \"tile_shapes\"");
  for (const json::Value &t : tiles->array) {
    Artifact::Shape shape;
    if (Status s = stringField(t, "name", shape.name, where); !s)
      return s;
    const json::Value *q = t.get("q"), *kk = t.get("k");
    if (!q || !kk || !q->isInt() || !kk->isInt() || q->integer <= 0 ||
        kk->integer <= 0)
      return Status::error(where + ": bad tile shape " + shape.name);
    shape.q = q->integer;
    shape.k = kk->integer;
    out.shapes.push_back(shape);
  }
  out.present = true;
  return Status::success();
}

/// The launch plan ("stages") of the manifest, checked against the
/// directions and shapes it refers to.
static Status loadStages(CUmodule module, const json::Value &m,
                         const std::string &where,
                         const Artifact::Direction *dirs[2],
                         std::vector<std::vector<Artifact::StageKernel>> &out) {
  using Phase = Artifact::Phase;
  static const std::pair<const char *, Phase> kPhases[] = {
      {"check", Phase::Check}, {"rows", Phase::Rows},
      {"seqs", Phase::Seqs},   {"envinit", Phase::EnvInit},
      {"env", Phase::Env},     {"tiles", Phase::Tiles},
      {"pack", Phase::Pack},   {"count", Phase::Count},
      {"scan", Phase::Scan},   {"fill", Phase::Fill}};
  const json::Value *stages = m.get("stages");
  if (!stages || !stages->isArray() || stages->array.empty())
    return Status::error(where + ": missing array \"stages\"");
  for (const json::Value &stage : stages->array) {
    if (!stage.isArray())
      return Status::error(where + ": a stage is not an array of kernels");
    std::vector<Artifact::StageKernel> kernels;
    for (const json::Value &k : stage.array) {
      Artifact::StageKernel kernel;
      std::string name;
      if (Status s = stringField(k, "kernel", name, where); !s)
        return s;
      const json::Value *phases = k.get("phases");
      if (!phases || !phases->isArray())
        return Status::error(where + ": kernel " + name + " lists no phases");
      for (const json::Value &p : phases->array) {
        if (!p.isArray() || p.array.size() != 3 || !p.array[0].isString() ||
            !p.array[1].isInt() || !p.array[2].isInt())
          return Status::error(where + ": kernel " + name +
                               ": a phase is not [name, direction, shape]");
        Artifact::StageKernel::Item item{Phase::Check,
                                         static_cast<int>(p.array[1].integer),
                                         static_cast<int>(p.array[2].integer)};
        auto *known = std::find_if(
            std::begin(kPhases), std::end(kPhases),
            [&](const auto &e) { return p.array[0].string == e.first; });
        const Artifact::Direction *dir =
            item.direction == 0 || item.direction == 1 ? dirs[item.direction]
                                                       : nullptr;
        bool rowPhase =
            known != std::end(kPhases) &&
            (known->second == Phase::Check || known->second == Phase::Rows);
        if (known == std::end(kPhases) || !dir ||
            (rowPhase ? item.shape != -1
                      : item.shape < 0 || static_cast<size_t>(item.shape) >=
                                              dir->shapes.size()))
          return Status::error(where + ": kernel " + name + ": bad phase " +
                               p.array[0].string);
        item.phase = known->second;
        kernel.phases.push_back(item);
      }
      CMASK_CU(cuModuleGetFunction(&kernel.fn, module, name.c_str()));
      kernels.push_back(std::move(kernel));
    }
    out.push_back(std::move(kernels));
  }
  return Status::success();
}

Status Artifact::load(const std::string &dir, int deviceIndex,
                      std::unique_ptr<Artifact> &out) {
  std::unique_ptr<Artifact> a(new Artifact());
  std::string text, error;
  std::string manifestPath = dir + "/manifest.json";
  if (Status s = readFile(manifestPath, text); !s)
    return s;
  json::Value m;
  if (!json::parse(text, m, error) || !m.isObject())
    return Status::error(manifestPath + ": invalid JSON: " + error);
  const json::Value *format = m.get("format");
  if (!format || !format->isInt() || format->integer != kManifestFormat)
    return Status::error(manifestPath + ": unsupported \"format\" (expected " +
                         std::to_string(kManifestFormat) +
                         "; rebuild the artifact with this version's "
                         "cmask-translate)");
  std::string arch;
  if (Status s = stringField(m, "spec", a->spec, manifestPath); !s)
    return s;
  if (Status s = stringField(m, "arch", arch, manifestPath); !s)
    return s;
  const json::Value *meta = m.get("metadata");
  if (!meta || !meta->isArray())
    return Status::error(manifestPath + ": missing array \"metadata\"");
  for (const json::Value &entry : meta->array) {
    std::string name, role;
    if (Status s = stringField(entry, "name", name, manifestPath); !s)
      return s;
    if (Status s = stringField(entry, "role", role, manifestPath); !s)
      return s;
    MetadataRole r;
    if (role == "scalar")
      r = MetadataRole::Scalar;
    else if (role == "per_sequence")
      r = MetadataRole::PerSequence;
    else if (role == "offsets")
      r = MetadataRole::Offsets;
    else
      return Status::error(manifestPath + ": metadata " + name +
                           " has unknown role " + role);
    a->metadata.push_back({name, r});
  }

  CMASK_CU(cuInit(0));
  CMASK_CU(cuDeviceGet(&a->device, deviceIndex));
  CMASK_CU(cuDevicePrimaryCtxRetain(&a->context, a->device));
  ScopedContext scope(a->context);
  int major = 0, minor = 0;
  CMASK_CU(cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, a->device));
  CMASK_CU(cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, a->device));
  std::string deviceArch =
      "sm_" + std::to_string(major) + std::to_string(minor);
  const json::Value *files = m.get("files");
  const json::Value *cubin = files ? files->get("cubin") : nullptr;
  const json::Value *ptx = files ? files->get("ptx") : nullptr;
  std::string image;
  bool exact = arch == deviceArch || arch == deviceArch + "a";
  if (cubin && cubin->isString() && exact) {
    if (Status s = readFile(dir + "/" + cubin->string, image); !s)
      return s;
  } else if (ptx && ptx->isString()) {
    // PTX for sm_90a runs only on sm_90; PTX for sm_80 JIT-compiles for newer
    // devices.
    if (arch == "sm_90a" && deviceArch != "sm_90")
      return Status::error(manifestPath +
                           ": the artifact was built for sm_90a "
                           "and this device is " +
                           deviceArch + "; rebuild it with --arch=sm_80");
    if (Status s = readFile(dir + "/" + ptx->string, image); !s)
      return s;
    image.push_back('\0');
  } else {
    return Status::error(manifestPath + ": no loadable image for " +
                         deviceArch + " (artifact built for " + arch + ")");
  }
  CMASK_CU(cuModuleLoadData(&a->module, image.data()));
  if (Status s = loadDirection(m, manifestPath, a->rowDirection); !s)
    return s;
  const json::Value *columns = m.get("columns");
  if (!columns || !columns->isObject())
    return Status::error(manifestPath + ": missing object \"columns\"");
  if (Status s = stringField(*columns, "mode", a->columnMode, manifestPath); !s)
    return s;
  if (a->columnMode != "rows")
    if (Status s = loadDirection(*columns, manifestPath + " (columns)",
                                 a->columnDirection);
        !s)
      return s;
  const Artifact::Direction *dirs[2] = {&a->rowDirection, a->getColumns()};
  if (Status s = loadStages(a->module, m, manifestPath, dirs, a->stages); !s)
    return s;
  if (Status s = a->loadAttention(dir, m, deviceArch); !s)
    return s;
  out = std::move(a);
  return Status::success();
}

Artifact::~Artifact() {
  if (module || attentionModule) {
    ScopedContext scope(context);
    if (module)
      cuModuleUnload(module);
    if (attentionModule)
      cuModuleUnload(attentionModule);
  }
  if (context)
    cuDevicePrimaryCtxRelease(device);
}

/// Allocates one direction's buffers for `numSeqs` sequences of at most
/// `totalRows` rows in all and `maxCols` columns each.
static Status allocateDirection(const Artifact::Direction &dir,
                                const char *what, int32_t numSeqs,
                                int64_t totalRows, int64_t maxCols,
                                CUdevice device, DirectionBuffers &out) {
  for (const Artifact::Shape &shape : dir.shapes)
    if ((maxCols + shape.k - 1) / shape.k > kMaxKeyTiles)
      return Status::error("createDescriptor: " + std::to_string(maxCols) +
                           " " + what + " per sequence make more than " +
                           std::to_string(kMaxKeyTiles) + " tiles of " +
                           shape.name + " (the tile-list entries' limit)");
  size_t table = static_cast<size_t>(totalRows) * dir.numSlots * 2;
  if (Status s = out.intervals.allocate(table, device); !s)
    return s;
  if (Status s = out.merged.allocate(table, device); !s)
    return s;
  for (const Artifact::Shape &shape : dir.shapes) {
    TileBuffers t;
    t.maxQTiles = (totalRows + shape.q - 1) / shape.q + numSeqs;
    int64_t nkt = (maxCols + shape.k - 1) / shape.k;
    t.nktWords = static_cast<int32_t>(std::max<int64_t>(1, (nkt + 15) / 16));
    size_t stride = static_cast<size_t>(t.nktWords) * 16;
    size_t nqt = static_cast<size_t>(t.maxQTiles);
    for (auto [buffer, n] :
         {std::pair<DeviceBuffer *, size_t>{&t.qTileBase, numSeqs + 1},
          {&t.qTileSeq, nqt},
          {&t.counts, nqt + 1},
          {&t.tileState, nqt * t.nktWords},
          {&t.tileInfo, nqt * stride},
          {&t.tileOffsets, nqt + 1},
          {&t.tileEntries, nqt * stride},
          {&t.tileOrder, nqt},
          // Per (q tile, slot index): 8 words, and 8 per chunk of 16 rows.
          {&t.envelopes,
           nqt * static_cast<size_t>(dir.numSlots) *
               (8 + 8 * static_cast<size_t>((shape.q + 15) / 16))},
          {&t.wordPrefix, nqt * t.nktWords}})
      if (Status s = buffer->allocate(n, device); !s)
        return s;
    out.tiles.push_back(std::move(t));
  }
  return Status::success();
}

Status Artifact::createDescriptor(const Bounds &bounds, Descriptor &d) const {
  if (bounds.numSeqs < 0 || bounds.totalQ < 0 || bounds.maxSeqlenK < 0 ||
      bounds.totalK < 0 || bounds.maxSeqlenQ < 0)
    return Status::error("createDescriptor: negative bounds");
  if (bounds.columns && !getColumns())
    return Status::error("createDescriptor: spec @" + spec +
                         " has no column descriptor (column mode \"" +
                         columnMode +
                         "\": the backward pass checks row "
                         "intervals); create it without columns");
  Descriptor fresh;
  fresh.bounds = bounds;
  if (Status s = fresh.error.allocate(1, device); !s)
    return s;
  if (Status s =
          allocateDirection(rowDirection, "keys", bounds.numSeqs, bounds.totalQ,
                            bounds.maxSeqlenK, device, fresh.rows);
      !s)
    return s;
  if (bounds.columns)
    if (Status s = allocateDirection(columnDirection, "queries", bounds.numSeqs,
                                     bounds.totalK, bounds.maxSeqlenQ, device,
                                     fresh.columns);
        !s)
      return s;
  d = std::move(fresh); // only a complete descriptor replaces the old one
  return Status::success();
}

namespace {
/// Kernel parameters with stable storage: scalars and memref descriptors
/// (allocated ptr, aligned ptr, offset, size, stride).
class Params {
public:
  void i64(int64_t v) { put(&v, 8); }
  void i32(int32_t v) { put(&v, 4); }
  void buffer(CUdeviceptr p, size_t n) {
    for (uint64_t v :
         {uint64_t(p), uint64_t(p), uint64_t(0), uint64_t(n), uint64_t(1)})
      put(&v, 8);
  }
  /// The parameters packed as the kernel's parameter space lays them out
  /// (each at its natural alignment), passed to cuLaunchKernel in one
  /// buffer: cheaper for the driver than one pointer per parameter (the
  /// stage kernels take hundreds).
  void *data() { return bytes.data(); }
  size_t size() const { return bytes.size(); }

private:
  void put(const void *v, size_t n) {
    bytes.resize((bytes.size() + n - 1) / n * n); // align
    const auto *p = static_cast<const unsigned char *>(v);
    bytes.insert(bytes.end(), p, p + n);
  }
  std::vector<unsigned char> bytes;
};

constexpr unsigned kThreads = 128;

Status launch(CUfunction fn, int64_t items, Params &params, CUstream stream) {
  unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, (items + kThreads - 1) / kThreads));
  size_t size = params.size();
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CMASK_CU(cuLaunchKernel(fn, blocks, 1, 1, kThreads, 1, 1, 0, stream, nullptr,
                          extra));
  return Status::success();
}
} // namespace

namespace {
/// What the phases of one direction read: the sequences (rows and columns
/// trade places in the column direction) and the metadata.
struct PhaseInputs {
  int32_t numSeqs;
  int64_t totalRows;
  CUdeviceptr cuRows, cuCols;
  const std::vector<std::pair<std::string, MetadataRole>> &roles;
  const std::vector<MetadataArg> &args;
  const DeviceBuffer &error;
};

/// The argument group of the row and check phases of one direction.
void pushRowGroup(Params &p, const PhaseInputs &in,
                  const DirectionBuffers &buffers, size_t table) {
  size_t seqs = static_cast<size_t>(in.numSeqs) + 1;
  p.i32(in.numSeqs);
  p.buffer(in.cuRows, seqs);
  p.buffer(in.cuCols, seqs);
  for (size_t k = 0; k < in.args.size(); ++k) {
    switch (in.roles[k].second) {
    case MetadataRole::Scalar:
      p.i32(in.args[k].scalar);
      break;
    case MetadataRole::PerSequence:
      p.buffer(in.args[k].values, static_cast<size_t>(in.numSeqs));
      break;
    case MetadataRole::Offsets:
      p.buffer(in.args[k].values, in.args[k].numValues);
      p.buffer(in.args[k].starts, seqs);
      break;
    }
  }
  p.buffer(buffers.intervals.get(), table);
  p.buffer(buffers.merged.get(), table);
  p.buffer(in.error.get(), in.error.size());
}

/// The argument group of the tile phases of one direction and shape (`t`
/// null: a direction the descriptor was not built with; its phases get no
/// items).
void pushTileGroup(Params &p, const PhaseInputs &in,
                   const DirectionBuffers &buffers, const TileBuffers *t,
                   size_t table) {
  size_t seqs = static_cast<size_t>(in.numSeqs) + 1;
  static const TileBuffers none;
  const TileBuffers &tb = t ? *t : none;
  p.i32(in.numSeqs);
  p.i32(tb.nktWords);
  p.buffer(in.cuRows, seqs);
  p.buffer(in.cuCols, seqs);
  p.buffer(buffers.intervals.get(), table);
  p.buffer(buffers.merged.get(), table);
  for (const DeviceBuffer *b : std::initializer_list<const DeviceBuffer *>{
           &tb.qTileBase, &tb.qTileSeq, &tb.counts, &tb.tileState, &tb.tileInfo,
           &tb.tileOffsets, &tb.tileEntries, &tb.tileOrder, &tb.envelopes,
           &tb.wordPrefix, &in.error})
    p.buffer(b->get(), b->size());
}
} // namespace

/// Whether two directions have the same K, tile shapes and buffer sizes.
static bool sameLayout(const Artifact::Direction &a, const DirectionBuffers &ab,
                       const Artifact::Direction &b,
                       const DirectionBuffers &bb) {
  if (a.numSlots != b.numSlots || a.shapes.size() != b.shapes.size() ||
      ab.tiles.size() != bb.tiles.size() ||
      ab.intervals.size() != bb.intervals.size())
    return false;
  for (size_t s = 0; s < a.shapes.size(); ++s) {
    const TileBuffers &x = ab.tiles[s], &y = bb.tiles[s];
    if (a.shapes[s].q != b.shapes[s].q || a.shapes[s].k != b.shapes[s].k ||
        x.maxQTiles != y.maxQTiles || x.nktWords != y.nktWords ||
        x.envelopes.size() != y.envelopes.size())
      return false;
  }
  return true;
}

/// Copies every buffer of `from` to `to` (same layout) on `stream`.
static Status copyDirection(const DirectionBuffers &from, DirectionBuffers &to,
                            CUstream stream) {
  auto copy = [&](const DeviceBuffer &src, DeviceBuffer &dst) -> Status {
    if (src.size())
      CMASK_CU(cuMemcpyDtoDAsync(dst.get(), src.get(),
                                 src.size() * sizeof(int32_t), stream));
    return Status::success();
  };
  if (Status s = copy(from.intervals, to.intervals); !s)
    return s;
  if (Status s = copy(from.merged, to.merged); !s)
    return s;
  for (size_t t = 0; t < from.tiles.size(); ++t) {
    const TileBuffers &x = from.tiles[t];
    TileBuffers &y = to.tiles[t];
    for (auto [src, dst] :
         std::initializer_list<std::pair<const DeviceBuffer *, DeviceBuffer *>>{
             {&x.qTileBase, &y.qTileBase},
             {&x.qTileSeq, &y.qTileSeq},
             {&x.counts, &y.counts},
             {&x.tileState, &y.tileState},
             {&x.tileInfo, &y.tileInfo},
             {&x.tileOffsets, &y.tileOffsets},
             {&x.tileEntries, &y.tileEntries},
             {&x.tileOrder, &y.tileOrder},
             {&x.envelopes, &y.envelopes},
             {&x.wordPrefix, &y.wordPrefix}})
      if (Status s = copy(*src, *dst); !s)
        return s;
  }
  return Status::success();
}

Status Artifact::preprocess(Descriptor &d, int32_t numSeqs, int64_t totalQ,
                            int64_t totalK, CUdeviceptr cuSeqlensQ,
                            CUdeviceptr cuSeqlensK,
                            const std::vector<MetadataArg> &args,
                            CUstream stream, bool checked) const {
  const Bounds &bounds = d.bounds;
  bool badColumns = bounds.columns && (totalK < 0 || totalK > bounds.totalK ||
                                       (numSeqs == 0 && totalK > 0));
  if (numSeqs < 0 || numSeqs > bounds.numSeqs || totalQ < 0 ||
      totalQ > bounds.totalQ || (numSeqs == 0 && totalQ > 0) || badColumns)
    return Status::error(
        "preprocess: batch (" + std::to_string(numSeqs) + " sequences, " +
        std::to_string(totalQ) + " queries, " + std::to_string(totalK) +
        " keys) exceeds the descriptor's bounds (" +
        std::to_string(bounds.numSeqs) + ", " + std::to_string(bounds.totalQ) +
        (bounds.columns ? ", " + std::to_string(bounds.totalK) : "") + ")");
  if (args.size() != metadata.size())
    return Status::error("preprocess: spec @" + spec + " takes " +
                         std::to_string(metadata.size()) +
                         " metadata inputs, got " +
                         std::to_string(args.size()));
  for (size_t k = 0; k < args.size(); ++k) {
    const auto &[name, role] = metadata[k];
    if (role != MetadataRole::Scalar && !args[k].values)
      return Status::error("preprocess: metadata " + name +
                           " has no device buffer");
    if (role == MetadataRole::Offsets && !args[k].starts)
      return Status::error("preprocess: offsets metadata " + name +
                           " has no per-sequence starts buffer");
  }
  ScopedContext scope(context);
  // Per direction: its inputs (the column spec's rows are the keys), its
  // buffers (when built) and the size of its interval table at this batch.
  const PhaseInputs in[2] = {
      {numSeqs, totalQ, cuSeqlensQ, cuSeqlensK, metadata, args, d.error},
      {numSeqs, totalK, cuSeqlensK, cuSeqlensQ, metadata, args, d.error}};
  const Direction *dirs[2] = {&rowDirection, &columnDirection};
  const DirectionBuffers *buffers[2] = {&d.rows, &d.columns};
  // A symmetric spec's column descriptor is its row descriptor with q and k
  // swapped: when they are the same sequences (one cu_seqlens buffer for
  // both, as self-attention passes) and the same shapes and sizes, it is a
  // copy of the rows' (bit for bit what the column phases would build).
  bool mirror = bounds.columns && columnMode == "symmetric" &&
                cuSeqlensQ == cuSeqlensK && totalQ == totalK &&
                sameLayout(rowDirection, d.rows, columnDirection, d.columns);
  bool built[2] = {true, bounds.columns && !mirror};
  size_t table[2] = {static_cast<size_t>(totalQ) * rowDirection.numSlots * 2,
                     bounds.columns ? static_cast<size_t>(totalK) *
                                          columnDirection.numSlots * 2
                                    : 0};
  auto itemsOf = [&](const StageKernel::Item &item) -> int64_t {
    if (!built[item.direction])
      return 0;
    if (item.phase == Phase::Check)
      return checked ? numSeqs : 0;
    if (item.phase == Phase::Rows)
      return in[item.direction].totalRows;
    const Shape &shape = dirs[item.direction]->shapes[item.shape];
    const TileBuffers &t = buffers[item.direction]->tiles[item.shape];
    int64_t nqt = t.maxQTiles, K = dirs[item.direction]->numSlots;
    switch (item.phase) {
    case Phase::Seqs:
      return 1;
    case Phase::EnvInit:
      return nqt * K;
    case Phase::Env:
      return nqt * K * ((shape.q + 15) / 16);
    case Phase::Tiles:
    case Phase::Fill:
      return nqt * t.nktWords * 16;
    case Phase::Pack:
      return nqt * t.nktWords;
    case Phase::Count:
      return nqt;
    case Phase::Scan:
      return nqt + 1;
    default:
      return 0;
    }
  };
  d.batch = {true, numSeqs, totalQ, totalK, cuSeqlensQ, cuSeqlensK};
  if (checked)
    CMASK_CU(cuMemsetD32Async(d.error.get(), 0, 1, stream));
  for (const std::vector<StageKernel> &stage : stages)
    for (const StageKernel &kernel : stage) {
      Params p;
      int64_t total = 0;
      std::vector<std::pair<int, int>> groups;
      for (const StageKernel::Item &item : kernel.phases) {
        int64_t n = itemsOf(item);
        p.i64(n);
        total += n;
        std::pair<int, int> group{item.direction, item.shape};
        if (std::find(groups.begin(), groups.end(), group) == groups.end())
          groups.push_back(group);
      }
      if (total == 0)
        continue;
      for (auto [dir, shape] : groups) {
        if (shape < 0)
          pushRowGroup(p, in[dir], *buffers[dir], table[dir]);
        else
          pushTileGroup(p, in[dir], *buffers[dir],
                        built[dir] ? &buffers[dir]->tiles[shape] : nullptr,
                        table[dir]);
      }
      if (Status s = launch(kernel.fn, total, p, stream); !s)
        return s;
    }
  if (mirror)
    return copyDirection(d.rows, d.columns, stream);
  return Status::success();
}

Status Artifact::readErrorFlags(Descriptor &d, CUstream stream,
                                int32_t &flags) const {
  ScopedContext scope(context);
  CMASK_CU(cuStreamSynchronize(stream));
  std::vector<int32_t> host;
  if (Status s = d.error.download(host); !s)
    return s;
  flags = host.empty() ? 0 : host[0];
  return Status::success();
}
