//===- Attention.cpp - Load and launch the attention kernels --------------===//
//
// The manifest's "attention" object (docs/artifact.md), the checks of an
// attention call, the TMA tensor maps (cuTensorMapEncodeTiled) and the
// launch of the forward kernel (docs/attention.md has the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/Json.h"
#include "cmask_runtime/Runtime.h"

#include "Internal.h"
#include "KernelParams.h"
#include "SchedulerPool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace cmask::rt;

const char *cmask::rt::dtypeName(DType type) {
  return type == DType::BF16 ? "bf16" : "f16";
}

Status Artifact::parseAttention(const std::string &dir, const json::Value &m) {
  const json::Value *attention = m.get("attention");
  if (!attention || !attention->isObject()) {
    attentionUnavailable = "the artifact has no attention kernels (they need "
                           "--arch=sm_90a and a 128x64 or 128x128 tile shape)";
    return Status::success();
  }
  std::string where = dir + "/manifest.json (attention)";
  const json::Value *kernels = attention->get("kernels");
  if (!kernels || !kernels->isArray())
    return Status::error(where + ": missing array \"kernels\"");
  const json::Value *modules = attention->get("modules");
  if (!modules || !modules->isArray() || modules->array.empty())
    return Status::error(where + ": missing array \"modules\"");
  attentionModuleFiles.clear();
  for (const json::Value &module : modules->array) {
    const json::Value *ptx = module.get("ptx"), *cubin = module.get("cubin");
    if (!ptx || !ptx->isString() || (cubin && !cubin->isString()))
      return Status::error(where + ": a module lacks its \"ptx\" file");
    attentionModuleFiles.push_back(cubin ? cubin->string : ptx->string);
  }
  auto shapeIndex = [&](const std::string &name,
                        const Direction &dir = Direction()) {
    const Direction &in = dir.present ? dir : rowDirection;
    for (size_t s = 0; s < in.shapes.size(); ++s)
      if (in.shapes[s].name == name)
        return static_cast<int>(s);
    return -1;
  };
  for (const json::Value &k : kernels->array) {
    AttentionKernel kernel;
    const json::Value *name = k.get("kernel"), *type = k.get("dtype"),
                      *dim = k.get("head_dim"), *tile = k.get("tile_shape"),
                      *smem = k.get("shared_bytes"),
                      *threads = k.get("threads");
    if (!name || !name->isString() || !type || !type->isString() || !dim ||
        !dim->isInt() || !tile || !tile->isString() || !smem ||
        !smem->isInt() || !threads || !threads->isInt())
      return Status::error(where + ": a kernel lacks kernel, dtype, head_dim, "
                                   "tile_shape, shared_bytes or threads");
    kernel.name = name->string;
    const json::Value *module = k.get("module");
    if (!module || !module->isInt() || module->integer < 0 ||
        module->integer >= static_cast<int64_t>(attentionModuleFiles.size()))
      return Status::error(where + ": kernel " + kernel.name +
                           ": \"module\" is not an index into \"modules\"");
    kernel.module = static_cast<int>(module->integer);
    if (type->string != "bf16" && type->string != "f16")
      return Status::error(where + ": kernel " + kernel.name + ": dtype " +
                           type->string);
    kernel.dtype = type->string == "bf16" ? DType::BF16 : DType::F16;
    kernel.headDim = dim->integer;
    const json::Value *pass = k.get("pass");
    kernel.backward = pass && pass->isString() && pass->string == "backward";
    const json::Value *intervals = k.get("intervals");
    kernel.rowIntervals = kernel.backward && intervals &&
                          intervals->isString() && intervals->string == "rows";
    if (kernel.rowIntervals) {
      const json::Value *maxQ = k.get("max_seqlen_q");
      if (!maxQ || !maxQ->isInt() || maxQ->integer <= 0)
        return Status::error(where + ": backward kernel " + kernel.name +
                             " (row intervals) lacks max_seqlen_q");
      kernel.maxSeqlenQ = maxQ->integer;
    }
    if (kernel.backward && !kernel.rowIntervals && !columnDirection.present)
      return Status::error(where + ": backward kernel " + kernel.name +
                           " without a column direction");
    bool columnShape = kernel.backward && !kernel.rowIntervals;
    kernel.shape = columnShape ? shapeIndex(tile->string, columnDirection)
                               : shapeIndex(tile->string);
    if (kernel.shape < 0)
      return Status::error(where + ": kernel " + kernel.name + ": tile shape " +
                           tile->string + " is not a " +
                           (columnShape ? "column" : "row") + " tile shape");
    kernel.sharedBytes = smem->integer;
    if (const json::Value *schedule = k.get("schedule")) {
      if (kernel.backward || !schedule->isString() ||
          (schedule->string != "grid" && schedule->string != "persistent"))
        return Status::error(where + ": kernel " + kernel.name +
                             ": schedule is not \"grid\" or \"persistent\" "
                             "(a forward kernel's)");
      kernel.persistent = schedule->string == "persistent";
    }
    kernel.threads = threads->integer;
    if (const json::Value *pdl = k.get("programmatic_launch")) {
      if (!kernel.backward || pdl->kind != json::Value::Kind::Bool)
        return Status::error(where + ": kernel " + kernel.name +
                             ": programmatic_launch is not a boolean (a "
                             "backward kernel's)");
      // CMASK_PROGRAMMATIC_LAUNCH=0: plain launches (the kernels' waits
      // are then no-ops), where a driver refuses or mishandles them.
      const char *env = std::getenv("CMASK_PROGRAMMATIC_LAUNCH");
      kernel.programmaticLaunch =
          pdl->boolean && !(env && std::string(env) == "0");
    }
    if (kernel.backward)
      if (const char *env = std::getenv("CMASK_DQ_FIRST_STORE")) {
        std::string value = env;
        if (value != "0" && value != "1")
          return Status::error("CMASK_DQ_FIRST_STORE is \"" + value +
                               "\": 0 (never) or 1 (always: grouped query "
                               "heads and long sequences too); unset, the "
                               "runtime's rule");
        kernel.dqFirstStore = value == "1";
      }
    if (const json::Value *rows = k.get("dq_rows_tile_shape"))
      if (!rows->isString() ||
          (kernel.rowsShape = shapeIndex(rows->string)) < 0)
        return Status::error(where + ": kernel " + kernel.name +
                             ": dq_rows_tile_shape is not a row tile shape");
    // Every function's arguments must be this runtime's.
    for (auto [function, signature] : kernel.functions())
      if (std::string why = kernelABI.check(function, abi::toList(*signature));
          !why.empty())
        return Status::error(why);
    attentionKernels.push_back(kernel);
  }
  const json::Value *def = attention->get("default_tile_shape");
  if (!def || !def->isString() || shapeIndex(def->string) < 0)
    return Status::error(where + ": missing or unknown \"default_tile_shape\"");
  defaultAttentionShape = shapeIndex(def->string);
  // A 128x128 shape with forward kernels that a call naming no tile may run
  // instead of the default (attentionShape), where the compiler chose it:
  // tile_choice "runtime" (absent or "fixed", --attention-tile: never).
  const json::Value *choice = attention->get("tile_choice");
  if (choice && choice->isString() && choice->string == "runtime")
    for (const AttentionKernel &k : attentionKernels)
      if (!k.backward && rowDirection.shapes[k.shape].q == 128 &&
          rowDirection.shapes[k.shape].k == 128)
        squareAttentionShape = k.shape;
  return Status::success();
}

std::vector<std::pair<std::string, const abi::Signature *>>
AttentionKernel::functions() const {
  if (!backward)
    return {{name, &abi::forward::kSignature}};
  std::vector<std::pair<std::string, const abi::Signature *>> out = {
      {name, rowIntervals ? &abi::backward_rows::kSignature
                          : &abi::backward::kSignature},
      {name + "_pre", &abi::backward_pre::kSignature},
      {name + "_dq", &abi::backward_dq::kSignature}};
  if (rowsShape >= 0)
    out.push_back({name + "_dqr", &abi::backward_dq_rows::kSignature});
  return out;
}

Status Artifact::loadAttention(const std::string &dir,
                               const std::string &deviceArch) {
  if (attentionKernels.empty())
    return Status::success(); // attentionUnavailable says why
  if (deviceArch != "sm_90") {
    attentionUnavailable = "the attention kernels need an sm_90 GPU (Hopper: "
                           "TMA and wgmma); this device is " +
                           deviceArch + " (a portable path comes later)";
    return Status::success();
  }
  ScopedContext scope(context);
  // Each module's cubin, else its PTX (parseAttention chose the file).
  for (const std::string &file : attentionModuleFiles) {
    std::string image;
    if (Status s = readFile(dir + "/" + file, image); !s)
      return s;
    image.push_back('\0'); // PTX is text; a cubin ignores the extra byte
    CUmodule module = nullptr;
    CMASK_CU(cuModuleLoadData(&module, image.data()));
    attentionModules.push_back(module);
  }
  for (AttentionKernel &kernel : attentionKernels) {
    CUfunction *slots[] = {&kernel.fn, &kernel.pre, &kernel.convert,
                           &kernel.rows};
    // functions() lists the main kernel, then _pre, _dq and _dqr.
    auto functions = kernel.functions();
    for (size_t k = 0; k < functions.size(); ++k) {
      CMASK_CU(cuModuleGetFunction(slots[k], attentionModules[kernel.module],
                                   functions[k].first.c_str()));
      if (k == 0 || k == 3)
        CMASK_CU(cuFuncSetAttribute(
            *slots[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(kernel.sharedBytes)));
    }
  }
  // One forward CTA fits an SM (its shared memory and registers).
  int sms = 0;
  CMASK_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                device));
  residentCTAs = sms;
  schedulers = std::make_unique<SchedulerPool>();
  return schedulers->init();
}

namespace {

/// What is wrong with one tensor argument, or "".
std::string checkTensor(const char *name, const TensorView &t) {
  auto bad = [&](const std::string &why) {
    return std::string(name) + ": " + why;
  };
  if (!t.data)
    return bad("null data pointer");
  if (t.tokens < 0 || t.heads <= 0 || t.headDim <= 0)
    return bad("shape [" + std::to_string(t.tokens) + ", " +
               std::to_string(t.heads) + ", " + std::to_string(t.headDim) +
               "] is not [tokens, heads, head_dim]");
  if (t.tokenStride <= 0 || t.headStride <= 0)
    return bad("strides must be positive (token " +
               std::to_string(t.tokenStride) + ", head " +
               std::to_string(t.headStride) + ")");
  return "";
}

/// TMA needs 16-byte aligned bases and strides.
std::string checkTMA(const char *name, const TensorView &t) {
  if (t.data % 16 || t.tokenStride % 8 || t.headStride % 8)
    return std::string(name) +
           ": the data pointer must be 16-byte aligned and "
           "the token and head strides multiples of 8 "
           "elements (TMA); got strides " +
           std::to_string(t.tokenStride) + ", " + std::to_string(t.headStride) +
           " (call .contiguous())";
  return "";
}

constexpr unsigned kRing = abi::tensor_map::kRingRows;
constexpr unsigned kFixed = abi::tensor_map::kFixedRows;

/// A 3-D tensor map over [tokens, heads, head_dim] with boxes of `rows`
/// tokens x `heads` heads x 64 columns, 128B swizzle (abi::tensor_map; more
/// than one head: the forward's packed Q, abi::forward's q_pack_shift).
Status encode(CUtensorMap &map, const TensorView &t, unsigned rows,
              unsigned heads = 1) {
  cuuint64_t dims[3] = {
      static_cast<cuuint64_t>(t.headDim), static_cast<cuuint64_t>(t.heads),
      static_cast<cuuint64_t>(std::max<int64_t>(t.tokens, 1))};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.headStride) * 2,
                           static_cast<cuuint64_t>(t.tokenStride) * 2};
  cuuint32_t box[3] = {abi::tensor_map::kColumns, heads, rows};
  cuuint32_t elementStrides[3] = {1, 1, 1};
  CMASK_CU(cuTensorMapEncodeTiled(
      &map,
      t.dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      3, reinterpret_cast<void *>(t.data), dims, strides, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return Status::success();
}

} // namespace

/// The checks the forward and backward share: q, k, v, out (and, in the
/// backward, dout, dq, dk, dv) against each other and the descriptor's
/// batch; every buffer device memory of `device`. Empty when all is well.
static std::string checkAttentionArgs(
    const Descriptor &d, int device, const TensorView &q, const TensorView &k,
    const TensorView &v,
    std::initializer_list<std::pair<const char *, const TensorView *>> outputs,
    std::initializer_list<std::pair<const char *, CUdeviceptr>> buffers) {
  if (!d.batch.built)
    return "the descriptor holds no batch: run preprocess first";
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q},
                         {"k", &k},
                         {"v", &v}})
    if (std::string why = checkTensor(name, *t); !why.empty())
      return why;
  for (auto [name, t] : outputs)
    if (std::string why = checkTensor(name, *t); !why.empty())
      return why;
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q},
                         {"k", &k},
                         {"v", &v}})
    if (std::string why = checkTMA(name, *t); !why.empty())
      return why;
  for (auto [name, t] : outputs)
    if (t->data % 4 || t->tokenStride % 2 || t->headStride % 2)
      return std::string(name) +
             ": the data pointer must be 4-byte aligned and the strides even";
  bool sameType = k.dtype == q.dtype && v.dtype == q.dtype;
  bool sameDim = k.headDim == q.headDim && v.headDim == q.headDim;
  for (auto [name, t] : outputs) {
    sameType = sameType && t->dtype == q.dtype;
    sameDim = sameDim && t->headDim == q.headDim;
  }
  if (!sameType) {
    // The message only where it is returned (every call runs these checks).
    std::string types = std::string(dtypeName(q.dtype)) + ", " +
                        dtypeName(k.dtype) + ", " + dtypeName(v.dtype);
    for (auto [name, t] : outputs)
      types += std::string(", ") + dtypeName(t->dtype);
    return "the tensors must have one dtype (got " + types + ")";
  }
  if (!sameDim)
    return "the tensors must have one head dimension (q has " +
           std::to_string(q.headDim) + ")";
  for (auto [name, t] : outputs) {
    const TensorView &like = (name[0] == 'd' && name[1] == 'k')   ? k
                             : (name[0] == 'd' && name[1] == 'v') ? v
                                                                  : q;
    if (t->heads != like.heads || t->tokens != like.tokens)
      return std::string(name) + " must have " +
             (&like == &q   ? "q"
              : &like == &k ? "k"
                            : "v") +
             "'s shape";
  }
  if (v.heads != k.heads || v.tokens != k.tokens)
    return "k and v must have one shape";
  if (q.heads % k.heads)
    return std::to_string(q.heads) + " query heads are not a multiple of " +
           std::to_string(k.heads) + " key/value heads (GQA/MQA)";
  if (q.tokens != d.batch.totalQ || k.tokens != d.batch.totalK)
    return "q has " + std::to_string(q.tokens) + " tokens and k " +
           std::to_string(k.tokens) + "; the descriptor's batch has " +
           std::to_string(d.batch.totalQ) + " queries and " +
           std::to_string(d.batch.totalK) + " keys";
  // Every buffer device memory of `device`: both attributes in one driver
  // call per pointer.
  auto onDevice = [device](const char *name, CUdeviceptr ptr) -> std::string {
    if (!ptr)
      return "";
    unsigned memoryType = 0;
    int ordinal = -1;
    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *values[] = {&memoryType, &ordinal};
    if (cuPointerGetAttributes(2, attributes, values, ptr) != CUDA_SUCCESS ||
        memoryType != CU_MEMORYTYPE_DEVICE)
      return std::string(name) + " is not device memory";
    if (ordinal != device)
      return std::string(name) + " is on device " + std::to_string(ordinal) +
             "; the artifact is loaded on device " + std::to_string(device);
    return "";
  };
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q},
                         {"k", &k},
                         {"v", &v}})
    if (std::string why = onDevice(name, t->data); !why.empty())
      return why;
  for (auto [name, t] : outputs)
    if (std::string why = onDevice(name, t->data); !why.empty())
      return why;
  for (auto [name, ptr] : buffers)
    if (std::string why = onDevice(name, ptr); !why.empty())
      return why;
  return "";
}

int Artifact::attentionShape(const Descriptor &d) const {
  if (!hasAttention())
    return -1;
  return chooseSquareTiles(rowDirection.shapes[defaultAttentionShape].k,
                           squareAttentionShape >= 0, d.batch.totalK,
                           d.batch.numSeqs)
             ? squareAttentionShape
             : defaultAttentionShape;
}

Status Artifact::attentionForward(const Descriptor &d, const AttentionArgs &a,
                                  CUstream stream) const {
  auto error = [](const std::string &why) {
    return Status::error("attention: " + why);
  };
  if (!hasAttention())
    return error(attentionUnavailable);
  if (!a.lse)
    return error("lse: null pointer (fp32 [heads, tokens] is required)");
  if (std::string why =
          checkAttentionArgs(d, device, a.q, a.k, a.v, {{"out", &a.out}},
                             {{"lse", a.lse}, {"stats", a.stats}});
      !why.empty())
    return error(why);
  int packShift = gqaPackShift(a.gqaPacking, a.q.heads, a.k.heads);
  if (packShift < 0)
    return error("gqa_packing on: " + std::to_string(a.q.heads) +
                 " query heads over " + std::to_string(a.k.heads) +
                 " key/value heads (it packs groups of 2, 4, 8, 16, 32 or 64 "
                 "query heads per key/value head)");
  int shape = a.tileShape < 0 ? attentionShape(d) : a.tileShape;
  // The shape's kernels of each schedule.
  const AttentionKernel *grid = nullptr, *persistent = nullptr;
  for (const AttentionKernel &k : attentionKernels)
    if (!k.backward && k.dtype == a.q.dtype && k.headDim == a.q.headDim &&
        k.shape == shape)
      (k.persistent ? persistent : grid) = &k;
  // What the artifact has, for the errors (made only for them: a launch's
  // host time matters).
  auto have = [&] {
    std::string list;
    for (const AttentionKernel &k : attentionKernels)
      if (!k.backward)
        list += std::string(list.empty() ? "" : ", ") + dtypeName(k.dtype) +
                " D=" + std::to_string(k.headDim) + " " +
                rowDirection.shapes[k.shape].name +
                (k.persistent ? " persistent" : "");
    return list;
  };
  if (!grid && !persistent)
    return error(
        std::string("no kernel for ") + dtypeName(a.q.dtype) + ", head dim " +
        std::to_string(a.q.headDim) + ", tile shape " +
        (shape >= 0 && static_cast<size_t>(shape) < rowDirection.shapes.size()
             ? rowDirection.shapes[shape].name
             : std::to_string(shape)) +
        " (the artifact has: " + have() + ")");
  const TileBuffers &t = d.rows.tiles[shape];
  int64_t items = abi::batchQTiles(t.maxQTiles, d.batch.totalQ, d.batch.numSeqs,
                                   rowDirection.shapes[shape].q) *
                  a.q.heads;
  if (items > 0x7fffffff)
    return error("too many query tiles x heads for one launch");
  if (items == 0)
    return Status::success();
  const AttentionKernel *kernel = nullptr;
  switch (a.schedule) {
  case Schedule::Auto:
    kernel = persistent && (!grid ||
                            choosePersistent(items, residentCTAs,
                                             d.batch.totalK, d.batch.numSeqs))
                 ? persistent
                 : grid;
    break;
  case Schedule::Grid:
    kernel = grid;
    break;
  case Schedule::Persistent:
    kernel = persistent;
    break;
  }
  if (!kernel)
    return error(std::string("no kernel of the ") +
                 (a.schedule == Schedule::Grid ? "grid" : "persistent") +
                 " schedule for " + dtypeName(a.q.dtype) + ", head dim " +
                 std::to_string(a.q.headDim) + ", tile shape " +
                 rowDirection.shapes[shape].name +
                 " (the artifact has: " + have() + ")");
  // The persistent kernel's next item is the grid size plus a claim
  // (int32).
  if (kernel->persistent && items > 0x7fffffff - residentCTAs)
    return error("too many query tiles x heads for one launch");
  int64_t blocks = kernel->persistent ? std::min(items, residentCTAs) : items;

  ScopedContext scope(context);
  CUdeviceptr scheduler = 0;
  if (kernel->persistent)
    if (Status s = schedulers->acquire(stream, scheduler); !s)
      return s;
  CUtensorMap tmQ, tmK, tmV;
  if (Status s = encode(tmQ, a.q, kRing >> packShift, 1u << packShift); !s)
    return s;
  if (Status s =
          encode(tmK, a.k, static_cast<unsigned>(rowDirection.shapes[shape].k));
      !s)
    return s;
  if (Status s = encode(tmV, a.v, kRing); !s)
    return s;
  namespace f = abi::forward;
  KernelParams p(f::kSignature);
  p.tensorMap(f::TmQ, tmQ);
  p.tensorMap(f::TmK, tmK);
  p.tensorMap(f::TmV, tmV);
  p.pointer(f::Out, a.out.data);
  p.pointer(f::Lse, a.lse);
  p.pointer(f::CuSeqlensQ, d.batch.cuSeqlensQ);
  p.pointer(f::CuSeqlensK, d.batch.cuSeqlensK);
  p.pointer(f::Intervals, d.rows.intervals.get());
  p.pointer(f::QTileSeq, t.qTileSeq.get());
  p.pointer(f::QTileBase, t.qTileBase.get());
  p.pointer(f::Counts, t.counts.get());
  p.pointer(f::TileOffsets, t.tileOffsets.get());
  p.pointer(f::TileEntries, t.tileEntries.get());
  p.pointer(f::TileWindows, t.tileWindows.get());
  p.pointer(f::PartialCounts, t.partialCounts.get());
  p.pointer(f::TileOrder, t.tileOrder.get());
  p.pointer(f::Stats, a.stats);
  p.pointer(f::Scheduler, scheduler);
  p.i32(f::NumHeads, static_cast<int32_t>(a.q.heads));
  p.i32(f::KvGroup, static_cast<int32_t>(a.q.heads / a.k.heads));
  p.i32(f::QPackShift, packShift);
  p.i32(f::SectionHeads,
        static_cast<int32_t>(launchSectionHeads(
            a.sectionHeads, a.q.heads, a.k.heads, d.batch.totalK,
            d.bounds.maxSeqlenK, residentCTAs, a.q.headDim, /*bf16, f16*/ 2)));
  p.i64(f::OTokenStride, a.out.tokenStride);
  p.i64(f::OHeadStride, a.out.headStride);
  p.i64(f::TotalQ, a.q.tokens);
  float scale =
      a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.q.headDim));
  p.f32(f::ScaleLog2, scale * 1.4426950408889634f);
  if (Status s = p.launch(kernel->fn, static_cast<unsigned>(blocks),
                          static_cast<unsigned>(kernel->threads),
                          static_cast<unsigned>(kernel->sharedBytes), stream);
      !s)
    return s;
  return Status::success();
}

namespace {
/// Byte offsets of the backward's scratch: the fp32 dQ accumulator
/// [total_q, heads, D], then -LSE*log2(e) and delta, each fp32
/// [heads, ldStride] (ldStride: total_q rounded up to 4, for TMA's 16-byte
/// row strides), then the accumulator units' words (abi::backward::
/// kUnitBytes); every part 256-byte aligned.
struct ScratchLayout {
  int64_t accRows, ldStride, mlse, delta, units, unitWords, bytes;
  /// The dQ accumulator's padded rows (AttentionBackward.cpp): each
  /// sequence starts at a multiple of 16 past the previous one, plus 64 rows
  /// of slack for the last query tile's rows past q_len.
  ScratchLayout(int64_t totalQ, int64_t numSeqs, int64_t heads,
                int64_t headDim) {
    auto round = [](int64_t x) { return (x + 255) / 256 * 256; };
    accRows = (totalQ + 15) / 16 * 16 + 16 * numSeqs + 64;
    ldStride = (totalQ + 3) / 4 * 4;
    mlse = round(accRows * heads * headDim * 4);
    delta = mlse + round(heads * ldStride * 4);
    // A word per abi::backward::kUnitBytes of the accumulator, rounded up
    // to whole float4 pairs (the pre-pass zeroes two float4s a thread).
    unitWords =
        (accRows * heads * headDim * 4 / abi::backward::kUnitBytes + 7) / 8 * 8;
    units = delta + round(heads * ldStride * 4);
    bytes = units + round(unitWords * 4);
  }
};
} // namespace

size_t cmask::rt::backwardScratchBytes(int64_t totalQ, int64_t numSeqs,
                                       int64_t heads, int64_t headDim) {
  return static_cast<size_t>(
      ScratchLayout(totalQ, numSeqs, heads, headDim).bytes);
}

namespace {
/// A 2-D tensor map over fp32 [heads, stride] rows, boxes of 68 x 1
/// (abi::tensor_map::kRowValues).
Status encodeRows(CUtensorMap &map, CUdeviceptr data, int64_t tokens,
                  int64_t stride, int64_t heads) {
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(std::max<int64_t>(tokens, 1)),
                        static_cast<cuuint64_t>(heads)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * 4};
  cuuint32_t box[2] = {abi::tensor_map::kRowValues, 1};
  cuuint32_t elementStrides[2] = {1, 1};
  CMASK_CU(cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void *>(data),
      dims, strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return Status::success();
}
} // namespace

Status Artifact::attentionBackward(const Descriptor &d, const BackwardArgs &a,
                                   CUstream stream) const {
  auto error = [](const std::string &why) {
    return Status::error("attention backward: " + why);
  };
  if (!hasAttention())
    return error(attentionUnavailable);
  if (!a.lse || !a.scratch)
    return error("lse and scratch are required");
  if (a.scratch % 16)
    return error("scratch must be 16-byte aligned");
  if (std::string why =
          checkAttentionArgs(d, device, a.q, a.k, a.v,
                             {{"out", &a.out},
                              {"dout", &a.dout},
                              {"dq", &a.dq},
                              {"dk", &a.dk},
                              {"dv", &a.dv}},
                             {{"lse", a.lse}, {"scratch", a.scratch}});
      !why.empty())
    return error(why);
  // dO goes through TMA; O is read 16 bytes at a time.
  for (auto [name, t] :
       {std::pair<const char *, const TensorView *>{"dout", &a.dout},
        {"out", &a.out}})
    if (std::string why = checkTMA(name, *t); !why.empty())
      return error(why);
  const AttentionKernel *kernel = nullptr;
  for (const AttentionKernel &k : attentionKernels)
    if (k.backward && k.dtype == a.q.dtype && k.headDim == a.q.headDim)
      kernel = &k;
  if (!kernel)
    return error(std::string("no backward kernel for ") + dtypeName(a.q.dtype) +
                 ", head dim " + std::to_string(a.q.headDim));
  if (!kernel->rowIntervals && (!d.bounds.columns || !getColumns()))
    return error("the descriptor has no column direction (create it with "
                 "bounds.columns; the spec's column mode is \"" +
                 columnMode + "\")");
  // The longest query sequence: the caller's, else the column direction's
  // bound (the preprocess flags longer sequences, error 8), else every query
  // token. It checks the row intervals' capacity and picks the dQ
  // accumulator's path (abi::backward::firstStoreFor).
  int64_t maxSeqlenQ = a.maxSeqlenQ > 0 ? a.maxSeqlenQ
                       : d.bounds.columns && d.bounds.maxSeqlenQ > 0
                           ? std::min(d.bounds.maxSeqlenQ, a.q.tokens)
                           : a.q.tokens;
  if (kernel->rowIntervals && maxSeqlenQ > kernel->maxSeqlenQ)
    return error(
        "a query sequence of " + std::to_string(maxSeqlenQ) +
        " tokens (max_seqlen_q; q.tokens when not given): without a column "
        "direction (column mode \"rows\") the backward lists each key tile's "
        "query tiles in shared memory, for query sequences of at most " +
        std::to_string(kernel->maxSeqlenQ) + " tokens");
  if (a.deterministic && !kernel->rows)
    return error(
        "deterministic: the artifact has no dQ pass over the row direction (it "
        "needs the row tile shape 128x64; rebuild the artifact with it)");
  const TileBuffers &t = kernel->rowIntervals ? d.rows.tiles[kernel->shape]
                                              : d.columns.tiles[kernel->shape];
  int64_t heads = a.q.heads, kvHeads = a.k.heads, dim = a.q.headDim;
  int64_t totalQ = a.q.tokens;
  int32_t numSeqs = d.batch.numSeqs;
  ScratchLayout scratch(totalQ, numSeqs, heads, dim);
  int64_t ldStride = scratch.ldStride;
  CUdeviceptr acc = a.scratch;
  CUdeviceptr mlse = acc + scratch.mlse;
  CUdeviceptr delta = acc + scratch.delta;
  // The first contribution to each accumulator unit is stored: the pre-pass
  // zeroes the units' words instead of the accumulator
  // (abi::backward::firstStoreFor: not with grouped query heads nor past
  // kFirstStoreMaxSeqlenQ-token query sequences, where it measured slower; not
  // with row intervals, whose consumers add with red.add). Deterministic, the
  // main kernel's dQ sums land in the accumulator unread, through the units all
  // the same.
  bool firstStore =
      !kernel->rowIntervals &&
      (kernel->dqFirstStore < 0
           ? abi::backward::firstStoreFor(dim, heads, kvHeads, maxSeqlenQ)
           : kernel->dqFirstStore == 1 && abi::backward::firstStore(dim));
  CUdeviceptr units = firstStore ? acc + scratch.units : 0;
  float scale =
      a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(dim));
  float scaleLog2 = scale * 1.4426950408889634f;

  ScopedContext scope(context);
  // The pre-pass: dim / 8 threads per (row, head), and the dQ accumulator
  // zeroed. Deterministic: the main kernel's dQ sums land in the
  // accumulator unread (the row pass computes dQ), so it is not zeroed.
  namespace pre = abi::backward_pre;
  int64_t accFloat4s = scratch.accRows * heads * dim / 4;
  int64_t zeroFloat4s = firstStore        ? scratch.unitWords / 4
                        : a.deterministic ? 0
                                          : accFloat4s;
  unsigned rowsBlocks =
      totalQ == 0 ? 0
                  : static_cast<unsigned>(
                        (pre::threadsFor(totalQ, heads, dim, zeroFloat4s) +
                         pre::kThreads - 1) /
                        pre::kThreads);
  if (rowsBlocks) {
    KernelParams p(pre::kSignature);
    p.pointer(pre::O, a.out.data);
    p.pointer(pre::DO, a.dout.data);
    p.pointer(pre::Lse, a.lse);
    p.pointer(pre::Mlse, mlse);
    p.pointer(pre::Delta, delta);
    p.i64(pre::TotalQ, totalQ);
    p.i32(pre::NumHeads, static_cast<int32_t>(heads));
    p.i64(pre::LdStride, ldStride);
    p.i64(pre::OTokenStride, a.out.tokenStride);
    p.i64(pre::OHeadStride, a.out.headStride);
    p.i64(pre::DOTokenStride, a.dout.tokenStride);
    p.i64(pre::DOHeadStride, a.dout.headStride);
    p.pointer(pre::Zero, firstStore ? units : acc);
    p.i64(pre::ZeroFloat4s, zeroFloat4s);
    if (Status s = p.launch(kernel->pre, rowsBlocks, pre::kThreads, 0, stream);
        !s)
      return s;
  }
  // Row intervals: a CTA per (key/value head, sequence, key tile of 128 up
  // to the descriptor's max_seqlen_k); else per (head, column tile).
  // Both cover the batch, not the descriptor's bounds (abi::batchQTiles):
  // no sequence has more keys than the batch.
  int64_t keyTiles =
      (std::min(d.bounds.maxSeqlenK, d.batch.totalK) + 127) / 128;
  const Artifact::Direction &fixed =
      kernel->rowIntervals ? rowDirection : columnDirection;
  int64_t blocks = kernel->rowIntervals
                       ? kvHeads * numSeqs * keyTiles
                       : abi::batchQTiles(t.maxQTiles, d.batch.totalK, numSeqs,
                                          fixed.shapes[kernel->shape].q) *
                             kvHeads;
  if (blocks > 0x7fffffff)
    return error("too many key tiles x heads for one launch");
  if (blocks) {
    CUtensorMap tmQ, tmK, tmV, tmdO, tmMlse, tmDelta;
    if (Status s = encode(tmQ, a.q, kRing); !s)
      return s;
    if (Status s = encode(tmK, a.k, kFixed); !s)
      return s;
    if (Status s = encode(tmV, a.v, kFixed); !s)
      return s;
    if (Status s = encode(tmdO, a.dout, kRing); !s)
      return s;
    if (Status s = encodeRows(tmMlse, mlse, totalQ, ldStride, heads); !s)
      return s;
    if (Status s = encodeRows(tmDelta, delta, totalQ, ldStride, heads); !s)
      return s;
    // Both main kernels begin with the same arguments (the ABI's backward
    // head), so backward:: names them in either.
    namespace bwd = abi::backward;
    namespace rows = abi::backward_rows;
    KernelParams p(kernel->rowIntervals ? rows::kSignature : bwd::kSignature);
    p.tensorMap(bwd::TmQ, tmQ);
    p.tensorMap(bwd::TmK, tmK);
    p.tensorMap(bwd::TmV, tmV);
    p.tensorMap(bwd::TmDO, tmdO);
    p.tensorMap(bwd::TmMlse, tmMlse);
    p.tensorMap(bwd::TmDelta, tmDelta);
    p.pointer(bwd::DQAccumulator, acc);
    p.pointer(bwd::DK, a.dk.data);
    p.pointer(bwd::DV, a.dv.data);
    p.pointer(bwd::CuSeqlensQ, d.batch.cuSeqlensQ);
    p.pointer(bwd::CuSeqlensK, d.batch.cuSeqlensK);
    int32_t h = static_cast<int32_t>(heads),
            group = static_cast<int32_t>(heads / kvHeads);
    // The descriptor arguments: the column direction's lists, or (row
    // intervals) the row direction's tiles and the grid's shape.
    if (kernel->rowIntervals) {
      p.pointer(rows::Intervals, d.rows.intervals.get());
      p.pointer(rows::QTileBase, t.qTileBase.get());
      p.pointer(rows::TileInfo, t.tileInfo.get());
      p.i32(rows::NumHeads, h);
      p.i32(rows::KvGroup, group);
      p.i32(rows::NumSeqs, numSeqs);
      p.i32(rows::KeyTiles, static_cast<int32_t>(keyTiles));
      p.i32(rows::InfoStride,
            static_cast<int32_t>(t.nktWords * abi::kTilesPerStateWord));
      p.i64(rows::DKTokenStride, a.dk.tokenStride);
      p.i64(rows::DKHeadStride, a.dk.headStride);
      p.i64(rows::DVTokenStride, a.dv.tokenStride);
      p.i64(rows::DVHeadStride, a.dv.headStride);
      p.i64(rows::TotalQ, totalQ);
      p.f32(rows::ScaleLog2, scaleLog2);
      p.f32(rows::Scale, scale);
    } else {
      p.pointer(bwd::Intervals, d.columns.intervals.get());
      p.pointer(bwd::KTileSeq, t.qTileSeq.get());
      p.pointer(bwd::KTileBase, t.qTileBase.get());
      p.pointer(bwd::Counts, t.counts.get());
      p.pointer(bwd::TileOffsets, t.tileOffsets.get());
      p.pointer(bwd::TileEntries, t.tileEntries.get());
      p.pointer(bwd::TileOrder, t.tileOrder.get());
      p.pointer(bwd::DQUnits, units);
      p.i32(bwd::NumHeads, h);
      p.i32(bwd::KvGroup, group);
      p.i64(bwd::DKTokenStride, a.dk.tokenStride);
      p.i64(bwd::DKHeadStride, a.dk.headStride);
      p.i64(bwd::DVTokenStride, a.dv.tokenStride);
      p.i64(bwd::DVHeadStride, a.dv.headStride);
      p.i64(bwd::TotalQ, totalQ);
      p.f32(bwd::ScaleLog2, scaleLog2);
      p.f32(bwd::Scale, scale);
    }
    // A programmatic dependent of the pre-pass just launched (its CTAs
    // start under the pre-pass's last wave and wait for it before reading
    // mlse, delta or the accumulator); after anything else, a plain launch:
    // it reads K and V before that wait.
    Launch how = kernel->programmaticLaunch && rowsBlocks ? Launch::Programmatic
                                                          : Launch::Plain;
    if (Status s =
            p.launch(kernel->fn, static_cast<unsigned>(blocks),
                     static_cast<unsigned>(kernel->threads),
                     static_cast<unsigned>(kernel->sharedBytes), stream, how);
        !s)
      return s;
  }
  if (a.deterministic) {
    // dQ over the row direction: one CTA per (query tile of 128, head).
    const TileBuffers &r = d.rows.tiles[kernel->rowsShape];
    int64_t rowBlocks =
        abi::batchQTiles(r.maxQTiles, totalQ, numSeqs,
                         rowDirection.shapes[kernel->rowsShape].q) *
        heads;
    if (rowBlocks > 0x7fffffff)
      return error("too many query tiles x heads for one launch");
    if (rowBlocks == 0)
      return Status::success();
    CUtensorMap tmQ, tmK, tmV, tmdO;
    if (Status s = encode(tmQ, a.q, kFixed); !s)
      return s;
    if (Status s = encode(tmK, a.k, kRing); !s)
      return s;
    if (Status s = encode(tmV, a.v, kRing); !s)
      return s;
    if (Status s = encode(tmdO, a.dout, kFixed); !s)
      return s;
    namespace dqr = abi::backward_dq_rows;
    KernelParams p(dqr::kSignature);
    p.tensorMap(dqr::TmQ, tmQ);
    p.tensorMap(dqr::TmK, tmK);
    p.tensorMap(dqr::TmV, tmV);
    p.tensorMap(dqr::TmDO, tmdO);
    p.pointer(dqr::DQ, a.dq.data);
    p.pointer(dqr::Mlse, mlse);
    p.pointer(dqr::Delta, delta);
    p.pointer(dqr::CuSeqlensQ, d.batch.cuSeqlensQ);
    p.pointer(dqr::CuSeqlensK, d.batch.cuSeqlensK);
    p.pointer(dqr::Intervals, d.rows.intervals.get());
    p.pointer(dqr::QTileSeq, r.qTileSeq.get());
    p.pointer(dqr::QTileBase, r.qTileBase.get());
    p.pointer(dqr::Counts, r.counts.get());
    p.pointer(dqr::TileOffsets, r.tileOffsets.get());
    p.pointer(dqr::TileEntries, r.tileEntries.get());
    p.pointer(dqr::TileOrder, r.tileOrder.get());
    p.i32(dqr::NumHeads, static_cast<int32_t>(heads));
    p.i32(dqr::KvGroup, static_cast<int32_t>(heads / kvHeads));
    p.i64(dqr::LdStride, ldStride);
    p.i64(dqr::DQTokenStride, a.dq.tokenStride);
    p.i64(dqr::DQHeadStride, a.dq.headStride);
    p.f32(dqr::ScaleLog2, scaleLog2);
    p.f32(dqr::Scale, scale);
    if (Status s = p.launch(kernel->rows, static_cast<unsigned>(rowBlocks),
                            static_cast<unsigned>(kernel->threads),
                            static_cast<unsigned>(kernel->sharedBytes), stream);
        !s)
      return s;
    return Status::success();
  }
  {
    // kFloat4sPerThread float4s of the blocked accumulator per thread.
    int32_t searchSteps = 0;
    while ((int64_t(1) << searchSteps) <= numSeqs)
      ++searchSteps;
    int64_t float4s = accFloat4s;
    namespace dq = abi::backward_dq;
    KernelParams p(dq::kSignature);
    p.pointer(dq::DQAccumulator, acc);
    p.pointer(dq::DQUnits, units);
    p.pointer(dq::DQ, a.dq.data);
    p.pointer(dq::CuSeqlensQ, d.batch.cuSeqlensQ);
    p.i32(dq::NumSeqs, numSeqs);
    p.i32(dq::SearchSteps, searchSteps);
    p.i64(dq::Float4s, float4s);
    p.i32(dq::NumHeads, static_cast<int32_t>(heads));
    p.i64(dq::DQTokenStride, a.dq.tokenStride);
    p.i64(dq::DQHeadStride, a.dq.headStride);
    p.f32(dq::Scale, scale);
    int64_t threads =
        (float4s + dq::kFloat4sPerThread - 1) / dq::kFloat4sPerThread;
    unsigned blocks =
        static_cast<unsigned>((threads + dq::kThreads - 1) / dq::kThreads);
    if (totalQ && numSeqs)
      // It waits for the grid before it ahead of any read (and every CTA
      // of the main kernel waits for the pre-pass): a programmatic
      // dependent of either.
      if (Status s = p.launch(kernel->convert, blocks, dq::kThreads, 0, stream,
                              kernel->programmaticLaunch ? Launch::Programmatic
                                                         : Launch::Plain);
          !s)
        return s;
  }
  return Status::success();
}
