//===- Attention.cpp - Load and launch the attention kernels --------------===//
//
// The manifest's "attention" object (docs/artifact.md), the checks of an
// attention call, the TMA tensor maps (cuTensorMapEncodeTiled) and the
// launch of the forward kernel (docs/attention.md has the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/Json.h"
#include "cmask_runtime/Runtime.h"

#include "Internal.h"

#include <cmath>
#include <cstring>

using namespace cmask::rt;

const char *cmask::rt::dtypeName(DType type) {
  return type == DType::BF16 ? "bf16" : "f16";
}

Status Artifact::loadAttention(const std::string &dir, const json::Value &m,
                               const std::string &deviceArch) {
  const json::Value *attention = m.get("attention");
  if (!attention || !attention->isObject()) {
    attentionUnavailable = "the artifact has no attention kernels (they need "
                           "--arch=sm_90a and a 128x64 or 128x128 tile shape)";
    return Status::success();
  }
  if (deviceArch != "sm_90") {
    attentionUnavailable = "the attention kernels need an sm_90 GPU (Hopper: "
                           "TMA and wgmma); this device is " +
                           deviceArch + " (a portable path comes later)";
    return Status::success();
  }
  std::string where = dir + "/manifest.json (attention)";
  const json::Value *files = attention->get("files");
  const json::Value *cubin = files ? files->get("cubin") : nullptr;
  const json::Value *ptx = files ? files->get("ptx") : nullptr;
  std::string image;
  if (cubin && cubin->isString()) {
    if (Status s = readFile(dir + "/" + cubin->string, image); !s)
      return s;
  } else if (ptx && ptx->isString()) {
    if (Status s = readFile(dir + "/" + ptx->string, image); !s)
      return s;
    image.push_back('\0');
  } else {
    return Status::error(where + ": no \"files\"");
  }
  ScopedContext scope(context);
  CMASK_CU(cuModuleLoadData(&attentionModule, image.data()));
  const json::Value *kernels = attention->get("kernels");
  if (!kernels || !kernels->isArray())
    return Status::error(where + ": missing array \"kernels\"");
  auto shapeIndex = [&](const std::string &name) {
    for (size_t s = 0; s < rowDirection.shapes.size(); ++s)
      if (rowDirection.shapes[s].name == name)
        return static_cast<int>(s);
    return -1;
  };
  for (const json::Value &k : kernels->array) {
    AttentionKernel kernel;
    std::string dtype, shape;
    const json::Value *name = k.get("kernel"), *type = k.get("dtype"),
                      *dim = k.get("head_dim"), *tile = k.get("tile_shape"),
                      *smem = k.get("shared_bytes"), *threads = k.get("threads");
    if (!name || !name->isString() || !type || !type->isString() || !dim ||
        !dim->isInt() || !tile || !tile->isString() || !smem || !smem->isInt() ||
        !threads || !threads->isInt())
      return Status::error(where + ": a kernel lacks kernel, dtype, head_dim, "
                                   "tile_shape, shared_bytes or threads");
    kernel.name = name->string;
    if (type->string != "bf16" && type->string != "f16")
      return Status::error(where + ": kernel " + kernel.name + ": dtype " + type->string);
    kernel.dtype = type->string == "bf16" ? DType::BF16 : DType::F16;
    kernel.headDim = dim->integer;
    kernel.shape = shapeIndex(tile->string);
    if (kernel.shape < 0)
      return Status::error(where + ": kernel " + kernel.name + ": tile shape " +
                           tile->string + " is not a row tile shape");
    kernel.sharedBytes = smem->integer;
    kernel.threads = threads->integer;
    CMASK_CU(cuModuleGetFunction(&kernel.fn, attentionModule, kernel.name.c_str()));
    CMASK_CU(cuFuncSetAttribute(kernel.fn,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(kernel.sharedBytes)));
    attentionKernels.push_back(kernel);
  }
  const json::Value *def = attention->get("default_tile_shape");
  if (!def || !def->isString() || shapeIndex(def->string) < 0)
    return Status::error(where + ": missing or unknown \"default_tile_shape\"");
  defaultAttentionShape = shapeIndex(def->string);
  return Status::success();
}

namespace {

/// What is wrong with one tensor argument, or "".
std::string checkTensor(const char *name, const TensorView &t) {
  auto bad = [&](const std::string &why) { return std::string(name) + ": " + why; };
  if (!t.data)
    return bad("null data pointer");
  if (t.tokens < 0 || t.heads <= 0 || t.headDim <= 0)
    return bad("shape [" + std::to_string(t.tokens) + ", " + std::to_string(t.heads) +
               ", " + std::to_string(t.headDim) + "] is not [tokens, heads, head_dim]");
  if (t.tokenStride <= 0 || t.headStride <= 0)
    return bad("strides must be positive (token " + std::to_string(t.tokenStride) +
               ", head " + std::to_string(t.headStride) + ")");
  return "";
}

/// TMA needs 16-byte aligned bases and strides.
std::string checkTMA(const char *name, const TensorView &t) {
  if (t.data % 16 || t.tokenStride % 8 || t.headStride % 8)
    return std::string(name) + ": the data pointer must be 16-byte aligned and "
                               "the token and head strides multiples of 8 "
                               "elements (TMA); got strides " +
           std::to_string(t.tokenStride) + ", " + std::to_string(t.headStride) +
           " (call .contiguous())";
  return "";
}

/// A 3-D tensor map over [tokens, heads, head_dim] with boxes of `rows`
/// tokens x 1 head x 64 columns, 128B swizzle.
Status encode(CUtensorMap &map, const TensorView &t, unsigned rows) {
  cuuint64_t dims[3] = {static_cast<cuuint64_t>(t.headDim),
                        static_cast<cuuint64_t>(t.heads),
                        static_cast<cuuint64_t>(std::max<int64_t>(t.tokens, 1))};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.headStride) * 2,
                           static_cast<cuuint64_t>(t.tokenStride) * 2};
  cuuint32_t box[3] = {64, 1, rows};
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

Status Artifact::attentionForward(const Descriptor &d, const AttentionArgs &a,
                                  CUstream stream) const {
  auto error = [](const std::string &why) {
    return Status::error("attention: " + why);
  };
  if (!hasAttention())
    return error(attentionUnavailable);
  if (!d.batch.built)
    return error("the descriptor holds no batch: run preprocess first");
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &a.q},
                         {"k", &a.k}, {"v", &a.v}, {"out", &a.out}})
    if (std::string why = checkTensor(name, *t); !why.empty())
      return error(why);
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &a.q},
                         {"k", &a.k}, {"v", &a.v}})
    if (std::string why = checkTMA(name, *t); !why.empty())
      return error(why);
  if (a.out.data % 4 || a.out.tokenStride % 2 || a.out.headStride % 2)
    return error("out: the data pointer must be 4-byte aligned and the strides even");
  if (a.k.dtype != a.q.dtype || a.v.dtype != a.q.dtype || a.out.dtype != a.q.dtype)
    return error(std::string("q, k, v and out must have one dtype (got ") +
                 dtypeName(a.q.dtype) + ", " + dtypeName(a.k.dtype) + ", " +
                 dtypeName(a.v.dtype) + ", " + dtypeName(a.out.dtype) + ")");
  if (a.k.headDim != a.q.headDim || a.v.headDim != a.q.headDim ||
      a.out.headDim != a.q.headDim)
    return error("q, k, v and out must have one head dimension (got " +
                 std::to_string(a.q.headDim) + ", " + std::to_string(a.k.headDim) +
                 ", " + std::to_string(a.v.headDim) + ", " +
                 std::to_string(a.out.headDim) + ")");
  if (a.out.heads != a.q.heads || a.out.tokens != a.q.tokens)
    return error("out must have q's shape");
  if (a.v.heads != a.k.heads || a.v.tokens != a.k.tokens)
    return error("k and v must have one shape");
  if (a.q.heads % a.k.heads)
    return error(std::to_string(a.q.heads) + " query heads are not a multiple of " +
                 std::to_string(a.k.heads) + " key/value heads (GQA/MQA)");
  if (a.q.tokens != d.batch.totalQ || a.k.tokens != d.batch.totalK)
    return error("q has " + std::to_string(a.q.tokens) + " tokens and k " +
                 std::to_string(a.k.tokens) + "; the descriptor's batch has " +
                 std::to_string(d.batch.totalQ) + " queries and " +
                 std::to_string(d.batch.totalK) + " keys");
  if (!a.lse)
    return error("lse: null pointer (fp32 [heads, tokens] is required)");
  // Every buffer must be device memory of the artifact's device.
  for (auto [name, ptr] : {std::pair<const char *, CUdeviceptr>{"q", a.q.data},
                           {"k", a.k.data}, {"v", a.v.data}, {"out", a.out.data},
                           {"lse", a.lse}, {"stats", a.stats}}) {
    if (!ptr)
      continue;
    int ordinal = -1;
    unsigned memoryType = 0;
    if (cuPointerGetAttribute(&memoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) !=
            CUDA_SUCCESS ||
        memoryType != CU_MEMORYTYPE_DEVICE ||
        cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) !=
            CUDA_SUCCESS)
      return error(std::string(name) + " is not device memory");
    if (ordinal != device)
      return error(std::string(name) + " is on device " + std::to_string(ordinal) +
                   "; the artifact is loaded on device " + std::to_string(device));
  }
  int shape = a.tileShape < 0 ? defaultAttentionShape : a.tileShape;
  const AttentionKernel *kernel = nullptr;
  std::string have;
  for (const AttentionKernel &k : attentionKernels) {
    have += std::string(have.empty() ? "" : ", ") + dtypeName(k.dtype) + " D=" +
            std::to_string(k.headDim) + " " + rowDirection.shapes[k.shape].name;
    if (k.dtype == a.q.dtype && k.headDim == a.q.headDim && k.shape == shape)
      kernel = &k;
  }
  if (!kernel)
    return error(std::string("no kernel for ") + dtypeName(a.q.dtype) + ", head dim " +
                 std::to_string(a.q.headDim) + ", tile shape " +
                 (shape >= 0 && static_cast<size_t>(shape) < rowDirection.shapes.size()
                      ? rowDirection.shapes[shape].name
                      : std::to_string(shape)) +
                 " (the artifact has: " + have + ")");
  const TileBuffers &t = d.rows.tiles[shape];
  int64_t blocks = t.maxQTiles * a.q.heads;
  if (blocks > 0x7fffffff)
    return error("too many query tiles x heads for one launch");
  if (blocks == 0)
    return Status::success();

  ScopedContext scope(context);
  CUtensorMap tmQ, tmK, tmV;
  if (Status s = encode(tmQ, a.q, 64); !s)
    return s;
  if (Status s = encode(tmK, a.k, static_cast<unsigned>(rowDirection.shapes[shape].k)); !s)
    return s;
  if (Status s = encode(tmV, a.v, 64); !s)
    return s;
  CUdeviceptr out = a.out.data, lse = a.lse, cuQ = d.batch.cuSeqlensQ,
              cuK = d.batch.cuSeqlensK, intervals = d.rows.intervals.get(),
              qTileSeq = t.qTileSeq.get(), qTileBase = t.qTileBase.get(),
              counts = t.counts.get(), offsets = t.tileOffsets.get(),
              entries = t.tileEntries.get(), order = t.tileOrder.get(),
              stats = a.stats;
  int32_t heads = static_cast<int32_t>(a.q.heads);
  int32_t group = static_cast<int32_t>(a.q.heads / a.k.heads);
  int64_t oToken = a.out.tokenStride, oHead = a.out.headStride, totalQ = a.q.tokens;
  float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.q.headDim));
  float scaleLog2 = scale * 1.4426950408889634f;
  void *params[] = {&tmQ,     &tmK,   &tmV,    &out,    &lse,       &cuQ,
                    &cuK,     &intervals, &qTileSeq, &qTileBase, &counts, &offsets,
                    &entries, &order, &stats,  &heads,  &group,     &oToken,
                    &oHead,   &totalQ, &scaleLog2};
  CMASK_CU(cuLaunchKernel(kernel->fn, static_cast<unsigned>(blocks), 1, 1,
                          static_cast<unsigned>(kernel->threads), 1, 1,
                          static_cast<unsigned>(kernel->sharedBytes), stream, params,
                          nullptr));
  return Status::success();
}
