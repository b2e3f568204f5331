//===- Runtime.cpp - Load a cmask artifact and run its preprocess ---------===//
//
// Artifact (Runtime.h): reading and checking a manifest before any CUDA
// call, loading the preprocess module, allocating a descriptor for given
// bounds, and running the preprocess kernel(s) with their launches packed
// from the kernel ABI (KernelParams.h).
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/Runtime.h"

#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/Json.h"

#include "Internal.h"
#include "KernelParams.h"
#include "SchedulerPool.h"

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace cmask::rt;

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
  if (owned) {
    if (ptr) {
      ScopedContext scope(context);
      cuMemFree(ptr);
    }
    if (context)
      cuDevicePrimaryCtxRelease(device);
  }
  ptr = 0;
  elements = 0;
  context = nullptr;
  owned = false;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    ptr = other.ptr;
    elements = other.elements;
    context = other.context;
    device = other.device;
    owned = other.owned;
    other.ptr = 0;
    other.elements = 0;
    other.context = nullptr;
    other.owned = false;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

Status DeviceBuffer::allocate(size_t n, CUdevice dev) {
  release();
  CMASK_CU(cuDevicePrimaryCtxRetain(&context, dev));
  device = dev;
  owned = true;
  ScopedContext scope(context);
  CMASK_CU(cuMemAlloc(&ptr, std::max<size_t>(n, 1) * sizeof(int32_t)));
  elements = n;
  return Status::success();
}

void DeviceBuffer::view(CUdeviceptr data, size_t n, CUcontext ctx) {
  release();
  ptr = data;
  elements = n;
  context = ctx;
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

/// The preprocess's launch plan ("preprocess_kernels") of the manifest,
/// checked against the directions and shapes it refers to, and each
/// kernel's arguments against the kernel ABI the artifact was built for.
static Status
parsePlan(const json::Value &m, const std::string &where,
          const Artifact::Direction *dirs[2],
          const std::vector<std::pair<std::string, MetadataRole>> &metadata,
          const ManifestABI &kernelABI, std::vector<Artifact::StageKernel> &out,
          int64_t &syncWords) {
  const json::Value *kernels = m.get("preprocess_kernels");
  if (!kernels || !kernels->isArray() || kernels->array.empty())
    return Status::error(where + ": missing array \"preprocess_kernels\"");
  syncWords = 0;
  for (const json::Value &k : kernels->array) {
    Artifact::StageKernel kernel;
    std::string name;
    if (Status s = stringField(k, "kernel", name, where); !s)
      return s;
    const json::Value *stages = k.get("stages");
    if (!stages || !stages->isArray() || stages->array.empty())
      return Status::error(where + ": kernel " + name + " lists no stages");
    for (const json::Value &stage : stages->array) {
      if (!stage.isArray() || stage.array.empty())
        return Status::error(where + ": kernel " + name +
                             ": a stage is not a non-empty array of phases");
      abi::Stage phases;
      for (const json::Value &p : stage.array) {
        if (!p.isArray() || p.array.size() != 3 || !p.array[0].isString() ||
            !p.array[1].isInt() || !p.array[2].isInt())
          return Status::error(where + ": kernel " + name +
                               ": a phase is not [name, direction, shape]");
        std::optional<abi::Phase> phase = abi::parsePhase(p.array[0].string);
        Artifact::StageKernel::Item item{phase.value_or(abi::Phase::Check),
                                         static_cast<int>(p.array[1].integer),
                                         static_cast<int>(p.array[2].integer)};
        const Artifact::Direction *dir =
            item.direction == 0 || item.direction == 1 ? dirs[item.direction]
                                                       : nullptr;
        if (!phase || !dir ||
            (abi::isRowPhase(*phase)
                 ? item.shape != -1
                 : item.shape < 0 ||
                       static_cast<size_t>(item.shape) >= dir->shapes.size()))
          return Status::error(where + ": kernel " + name + ": bad phase " +
                               p.array[0].string);
        phases.push_back(item);
      }
      kernel.stages.push_back(std::move(phases));
    }
    kernel.args = abi::stageKernelArgs(kernel.stages, metadata);
    if (std::string why = kernelABI.check(name, kernel.args); !why.empty())
      return Status::error(why);
    kernel.name = name;
    kernel.syncOffset = syncWords;
    syncWords += abi::syncWords(kernel.stages.size());
    out.push_back(std::move(kernel));
  }
  return Status::success();
}

Status Artifact::readManifest(const std::string &dir, json::Value &m,
                              std::string &arch) {
  std::string text, error;
  std::string manifestPath = dir + "/manifest.json";
  if (Status s = readFile(manifestPath, text); !s)
    return s;
  if (!json::parse(text, m, error) || !m.isObject())
    return Status::error(manifestPath + ": invalid JSON: " + error);
  const json::Value *format = m.get("format");
  if (!format || !format->isInt() || format->integer != abi::kManifestFormat)
    return Status::error(manifestPath + ": unsupported \"format\" (expected " +
                         std::to_string(abi::kManifestFormat) +
                         "; rebuild the artifact with this version's "
                         "cmask-translate)");
  // The kernels' argument lists, checked against this runtime's for each
  // kernel below (before any CUDA call).
  std::string abiError;
  if (!kernelABI.read(m, manifestPath, abiError))
    return Status::error(abiError);
  if (Status s = stringField(m, "spec", spec, manifestPath); !s)
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
    metadata.push_back({name, r});
  }
  if (Status s = loadDirection(m, manifestPath, rowDirection); !s)
    return s;
  const json::Value *columns = m.get("columns");
  if (!columns || !columns->isObject())
    return Status::error(manifestPath + ": missing object \"columns\"");
  if (Status s = stringField(*columns, "mode", columnMode, manifestPath); !s)
    return s;
  if (columnMode != "rows")
    if (Status s = loadDirection(*columns, manifestPath + " (columns)",
                                 columnDirection);
        !s)
      return s;
  const Artifact::Direction *dirs[2] = {&rowDirection, getColumns()};
  if (Status s = parsePlan(m, manifestPath, dirs, metadata, kernelABI,
                           preprocessKernels, syncWords);
      !s)
    return s;
  if (Status s = parseAttention(dir, m); !s)
    return s;

  return Status::success();
}

Status Artifact::check(const std::string &dir) {
  Artifact a;
  json::Value m;
  std::string arch;
  return a.readManifest(dir, m, arch);
}

Status Artifact::load(const std::string &dir, int deviceIndex,
                      std::unique_ptr<Artifact> &out) {
  std::unique_ptr<Artifact> a(new Artifact());
  json::Value m;
  std::string arch, manifestPath = dir + "/manifest.json";
  if (Status s = a->readManifest(dir, m, arch); !s)
    return s;

  // The manifest is read and checked: now the device.
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
  for (StageKernel &kernel : a->preprocessKernels)
    CMASK_CU(cuModuleGetFunction(&kernel.fn, a->module, kernel.name.c_str()));
  if (Status s = a->loadAttention(dir, deviceArch); !s)
    return s;
  out = std::move(a);
  return Status::success();
}

Artifact::~Artifact() {
  if (module || !attentionModules.empty()) {
    ScopedContext scope(context);
    if (module)
      cuModuleUnload(module);
    for (CUmodule m : attentionModules)
      cuModuleUnload(m);
  }
  if (context)
    cuDevicePrimaryCtxRelease(device);
}

namespace {
/// Places a descriptor's buffers one after another in its storage, each
/// at a multiple of Artifact::kStorageAlignment (base 0: only counts).
struct StoragePlan {
  CUdeviceptr base = 0;
  CUcontext context = nullptr;
  size_t bytes = 0;

  void place(DeviceBuffer &buffer, size_t elements) {
    constexpr size_t align = Artifact::kStorageAlignment;
    bytes = (bytes + align - 1) / align * align;
    buffer.view(base + bytes, elements, context);
    bytes += std::max<size_t>(elements, 1) * sizeof(int32_t);
  }
};
} // namespace

/// Places one direction's buffers for `numSeqs` sequences of at most
/// `totalRows` rows in all and `maxCols` columns each.
static Status placeDirection(const Artifact::Direction &dir, const char *what,
                             int32_t numSeqs, int64_t totalRows,
                             int64_t maxCols, StoragePlan &plan,
                             DirectionBuffers &out) {
  for (const Artifact::Shape &shape : dir.shapes)
    if ((maxCols + shape.k - 1) / shape.k > abi::kMaxKeyTiles)
      return Status::error("createDescriptor: " + std::to_string(maxCols) +
                           " " + what + " per sequence make more than " +
                           std::to_string(abi::kMaxKeyTiles) + " tiles of " +
                           shape.name + " (the tile-list entries' limit)");
  size_t table = static_cast<size_t>(totalRows) * dir.numSlots * 2;
  plan.place(out.intervals, table);
  plan.place(out.merged, table);
  out.tiles.clear();
  for (const Artifact::Shape &shape : dir.shapes) {
    auto layout =
        abi::TileLayout::of(numSeqs, totalRows, maxCols, shape.q, shape.k);
    TileBuffers t;
    t.maxQTiles = layout.maxQTiles;
    t.nktWords = layout.nktWords;
    for (int arg = 0; arg < abi::tile_group::kNumArgs; ++arg)
      if (DeviceBuffer *buffer = t.get(arg))
        plan.place(*buffer, static_cast<size_t>(layout.elements(
                                arg, numSeqs, dir.numSlots, shape.q)));
    out.tiles.push_back(std::move(t));
  }
  return Status::success();
}

/// Places every buffer of a descriptor for `bounds` from `plan.base` on.
static Status placeDescriptor(const Artifact &a, const Bounds &bounds,
                              StoragePlan &plan, Descriptor &d) {
  if (bounds.numSeqs < 0 || bounds.totalQ < 0 || bounds.maxSeqlenK < 0 ||
      bounds.totalK < 0 || bounds.maxSeqlenQ < 0)
    return Status::error("createDescriptor: negative bounds");
  if (bounds.columns && !a.getColumns())
    return Status::error("createDescriptor: spec @" + a.getSpec() +
                         " has no column descriptor (column mode \"" +
                         a.getColumnMode() +
                         "\": the backward pass checks row "
                         "intervals); create it without columns");
  d.bounds = bounds;
  plan.place(d.error, 1);
  plan.place(d.sync, static_cast<size_t>(a.getSyncWords()));
  if (Status s = placeDirection(a.getRows(), "keys", bounds.numSeqs,
                                bounds.totalQ, bounds.maxSeqlenK, plan, d.rows);
      !s)
    return s;
  if (bounds.columns)
    return placeDirection(*a.getColumns(), "queries", bounds.numSeqs,
                          bounds.totalK, bounds.maxSeqlenQ, plan, d.columns);
  return Status::success();
}

Status Artifact::descriptorBytes(const Bounds &bounds, size_t &bytes) const {
  StoragePlan plan;
  Descriptor scratch;
  if (Status s = placeDescriptor(*this, bounds, plan, scratch); !s)
    return s;
  bytes = plan.bytes;
  return Status::success();
}

Status Artifact::createDescriptor(const Bounds &bounds, Descriptor &d,
                                  CUdeviceptr storage,
                                  size_t storageBytes) const {
  size_t bytes = 0;
  if (Status s = descriptorBytes(bounds, bytes); !s)
    return s;
  Descriptor fresh;
  if (storage) {
    if (storage % kStorageAlignment)
      return Status::error("createDescriptor: the storage is not " +
                           std::to_string(kStorageAlignment) + "-byte aligned");
    if (storageBytes < bytes)
      return Status::error("createDescriptor: storage of " +
                           std::to_string(storageBytes) +
                           " bytes; the bounds need " + std::to_string(bytes));
  } else {
    // Whole int32 words (place() ends a buffer on a word).
    if (Status s = fresh.storage.allocate(bytes / sizeof(int32_t), device); !s)
      return s;
    storage = fresh.storage.get();
  }
  StoragePlan plan{storage, context};
  if (Status s = placeDescriptor(*this, bounds, plan, fresh); !s)
    return s;
  d = std::move(fresh); // only a complete descriptor replaces the old one
  return Status::success();
}

/// Whether a batch fits a descriptor's bounds (else why not).
static Status checkBatch(const Bounds &bounds, int32_t numSeqs, int64_t totalQ,
                         int64_t totalK) {
  bool badColumns = bounds.columns && (totalK < 0 || totalK > bounds.totalK ||
                                       (numSeqs == 0 && totalK > 0));
  if (numSeqs < 0 || numSeqs > bounds.numSeqs || totalQ < 0 ||
      totalQ > bounds.totalQ || (numSeqs == 0 && totalQ > 0) || badColumns)
    return Status::error(
        "batch (" + std::to_string(numSeqs) + " sequences, " +
        std::to_string(totalQ) + " queries, " + std::to_string(totalK) +
        " keys) exceeds the descriptor's bounds (" +
        std::to_string(bounds.numSeqs) + ", " + std::to_string(bounds.totalQ) +
        (bounds.columns ? ", " + std::to_string(bounds.totalK) : "") + ")");
  return Status::success();
}

Status Artifact::setBatch(Descriptor &d, int32_t numSeqs, int64_t totalQ,
                          int64_t totalK, CUdeviceptr cuSeqlensQ,
                          CUdeviceptr cuSeqlensK) const {
  if (Status s = checkBatch(d.bounds, numSeqs, totalQ, totalK); !s)
    return Status::error("setBatch: " + s.message);
  if (numSeqs > 0 && (!cuSeqlensQ || !cuSeqlensK))
    return Status::error("setBatch: null cu_seqlens");
  d.batch = {true, numSeqs, totalQ, totalK, cuSeqlensQ, cuSeqlensK};
  return Status::success();
}

namespace {
/// The preprocess's threads per block (one work item per thread).
constexpr unsigned kThreads = 128;

/// What the phases of one direction read: the sequences (rows and columns
/// trade places in the column direction) and the metadata.
struct PhaseInputs {
  int32_t numSeqs;
  int64_t totalRows;
  CUdeviceptr cuRows, cuCols;
  bool windowRows, windowCols; ///< a window follows the cu_seqlens
  const std::vector<std::pair<std::string, MetadataRole>> &roles;
  const std::vector<MetadataArg> &args;
  const DeviceBuffer &error;
};

/// Sets the row group (abi::rowGroupArgs) of one direction, from argument
/// `at` on; returns the index past it.
int setRowGroup(KernelParams &p, int at, const PhaseInputs &in,
                const DirectionBuffers &buffers, size_t table) {
  namespace head = abi::row_group_head;
  namespace tail = abi::row_group_tail;
  size_t seqs = static_cast<size_t>(in.numSeqs) + 1;
  p.i32(at + head::NumSeqs, in.numSeqs);
  // With a window, the buffer holds it after the starts (KernelABI.h).
  size_t window = abi::kWindowFields * static_cast<size_t>(in.numSeqs);
  p.buffer(at + head::CuSeqlensRows, in.cuRows,
           seqs + (in.windowRows ? window : 0));
  p.buffer(at + head::CuSeqlensCols, in.cuCols,
           seqs + (in.windowCols ? window : 0));
  at += head::kNumArgs;
  for (size_t k = 0; k < in.args.size(); ++k) {
    switch (in.roles[k].second) {
    case MetadataRole::Scalar:
      p.i32(at++, in.args[k].scalar);
      break;
    case MetadataRole::PerSequence:
      p.buffer(at++, in.args[k].values, static_cast<size_t>(in.numSeqs));
      break;
    case MetadataRole::Offsets:
      p.buffer(at++, in.args[k].values, in.args[k].numValues);
      p.buffer(at++, in.args[k].starts, seqs);
      break;
    }
  }
  p.buffer(at + tail::Intervals, buffers.intervals.get(), table);
  p.buffer(at + tail::Merged, buffers.merged.get(), table);
  p.buffer(at + tail::Error, in.error.get(), in.error.size());
  return at + tail::kNumArgs;
}

/// Sets the tile group (abi::tile_group) of one direction and shape from
/// argument `at` on (`t` null: a direction the descriptor was not built
/// with; its phases get no items); returns the index past it.
int setTileGroup(KernelParams &p, int at, const PhaseInputs &in,
                 const DirectionBuffers &buffers, const TileBuffers *t,
                 size_t table) {
  namespace g = abi::tile_group;
  size_t seqs = static_cast<size_t>(in.numSeqs) + 1;
  static const TileBuffers none;
  const TileBuffers &tb = t ? *t : none;
  p.i32(at + g::NumSeqs, in.numSeqs);
  p.i32(at + g::NktWords, tb.nktWords);
  p.buffer(at + g::CuSeqlensRows, in.cuRows, seqs);
  p.buffer(at + g::CuSeqlensCols, in.cuCols, seqs);
  p.buffer(at + g::Intervals, buffers.intervals.get(), table);
  p.buffer(at + g::Merged, buffers.merged.get(), table);
  p.buffer(at + g::Error, in.error.get(), in.error.size());
  for (int arg = 0; arg < g::kNumArgs; ++arg)
    if (const DeviceBuffer *b = tb.get(arg))
      p.buffer(at + arg, b->get(), b->size());
  return at + g::kNumArgs;
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

/// The end (one past the last byte) of a direction's buffers: placeDirection
/// places them one after another from `intervals` on.
static CUdeviceptr directionEnd(const DirectionBuffers &d) {
  CUdeviceptr end = d.merged.get() + d.merged.size() * sizeof(int32_t);
  for (const TileBuffers &t : d.tiles)
    for (int arg = 0; arg < abi::tile_group::kNumArgs; ++arg)
      if (const DeviceBuffer *b = t.get(arg))
        end =
            std::max<CUdeviceptr>(end, b->get() + b->size() * sizeof(int32_t));
  return end;
}

/// Copies every buffer of `from` to `to` (the same layout, placed alike
/// from their `intervals` on) on `stream`, in one copy.
static Status copyDirection(const DirectionBuffers &from, DirectionBuffers &to,
                            CUstream stream) {
  CUdeviceptr begin = from.intervals.get();
  size_t bytes = directionEnd(from) - begin;
  if (bytes)
    CMASK_CU(cuMemcpyDtoDAsync(to.intervals.get(), begin, bytes, stream));
  return Status::success();
}

Status Artifact::preprocess(Descriptor &d, int32_t numSeqs, int64_t totalQ,
                            int64_t totalK, CUdeviceptr cuSeqlensQ,
                            CUdeviceptr cuSeqlensK,
                            const std::vector<MetadataArg> &args,
                            CUstream stream, bool checked,
                            const Windows &windows) const {
  const Bounds &bounds = d.bounds;
  if (Status s = checkBatch(bounds, numSeqs, totalQ, totalK); !s)
    return Status::error("preprocess: " + s.message);
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
  const PhaseInputs in[2] = {{numSeqs, totalQ, cuSeqlensQ, cuSeqlensK,
                              windows.q, windows.k, metadata, args, d.error},
                             {numSeqs, totalK, cuSeqlensK, cuSeqlensQ,
                              windows.k, windows.q, metadata, args, d.error}};
  const Direction *dirs[2] = {&rowDirection, &columnDirection};
  const DirectionBuffers *buffers[2] = {&d.rows, &d.columns};
  // A symmetric spec's column descriptor is its row descriptor with q and k
  // swapped: when they are the same sequences (one cu_seqlens buffer for
  // both, as self-attention passes) and the same shapes and sizes, it is a
  // copy of the rows' (bit for bit what the column phases would build).
  bool mirror = bounds.columns && columnMode == "symmetric" &&
                cuSeqlensQ == cuSeqlensK && totalQ == totalK &&
                windows.q == windows.k &&
                sameLayout(rowDirection, d.rows, columnDirection, d.columns);
  bool built[2] = {true, bounds.columns && !mirror};
  size_t table[2] = {static_cast<size_t>(totalQ) * rowDirection.numSlots * 2,
                     bounds.columns ? static_cast<size_t>(totalK) *
                                          columnDirection.numSlots * 2
                                    : 0};
  auto itemsOf = [&](const StageKernel::Item &item) -> int64_t {
    if (!built[item.direction])
      return 0;
    if (item.phase == Phase::Check && !checked)
      return 0;
    abi::PhaseSizes sizes;
    sizes.numSeqs = numSeqs;
    sizes.totalRows = in[item.direction].totalRows;
    sizes.numSlots = dirs[item.direction]->numSlots;
    if (item.shape >= 0) {
      const TileBuffers &t = buffers[item.direction]->tiles[item.shape];
      sizes.tq = dirs[item.direction]->shapes[item.shape].q;
      sizes.tiles.maxQTiles = t.maxQTiles;
      sizes.tiles.nktWords = t.nktWords;
      sizes.tiles.stride = int64_t(t.nktWords) * abi::kTilesPerStateWord;
    }
    return abi::phaseItems(item.phase, sizes);
  };
  d.batch = {true, numSeqs, totalQ, totalK, cuSeqlensQ, cuSeqlensK};
  // The error flags and the kernels' sync words (placed after them): one
  // memset, the padding between included.
  CUdeviceptr control = d.error.get();
  if (d.sync.get() <= control)
    return Status::error("internal error: the descriptor's sync words are not "
                         "placed after its error flags");
  size_t controlWords =
      (d.sync.get() + d.sync.size() * sizeof(int32_t) - control) /
      sizeof(int32_t);
  CMASK_CU(cuMemsetD32Async(control, 0, controlWords, stream));
  for (const StageKernel &kernel : preprocessKernels) {
    KernelParams p(kernel.args);
    int64_t total = 0, blocks = 0;
    int at = 0;
    for (const abi::Stage &stage : kernel.stages) {
      int64_t items = 0;
      for (const StageKernel::Item &item : stage) {
        int64_t n = itemsOf(item);
        p.index(at++, n);
        items += n;
      }
      total += items;
      blocks += abi::stageBlocks(items, kThreads);
    }
    if (total == 0)
      continue;
    if (blocks > INT32_MAX)
      return Status::error("preprocess: " + std::to_string(blocks) +
                           " blocks for kernel " + kernel.name +
                           " pass CUDA's grid limit (a smaller batch, or "
                           "bounds)");
    for (auto [dir, shape] :
         abi::stageGroups(abi::stagePhases(kernel.stages))) {
      if (shape < 0)
        at = setRowGroup(p, at, in[dir], *buffers[dir], table[dir]);
      else
        at = setTileGroup(p, at, in[dir], *buffers[dir],
                          built[dir] ? &buffers[dir]->tiles[shape] : nullptr,
                          table[dir]);
    }
    p.buffer(at, d.sync.get() + kernel.syncOffset * sizeof(int32_t),
             static_cast<size_t>(abi::syncWords(kernel.stages.size())));
    if (Status s = p.launch(kernel.fn, static_cast<unsigned>(blocks), kThreads,
                            0, stream, Launch::Plain, /*packed=*/true);
        !s)
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
