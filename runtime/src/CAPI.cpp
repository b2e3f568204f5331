//===- CAPI.cpp - C API of the cmask runtime ------------------------------===//
//
// The runtime's C API (cmask_runtime.h) over Artifact and Attention: opaque
// handles, a status per call and the last error's text per thread, and
// cmask_abi(), the kernel ABI and structures as JSON for the Python
// bindings.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/cmask_runtime.h"

#include "cmask_runtime/DescriptorLayout.h"
#include "cmask_runtime/Runtime.h"

#include "Internal.h"

#include <cstddef>
#include <string>

using namespace cmask::rt;

struct cmask_artifact {
  std::unique_ptr<Artifact> impl;
};
struct cmask_descriptor {
  Descriptor impl;
};

static thread_local std::string lastError;

static cmask_status report(const Status &s) {
  if (s)
    return CMASK_OK;
  lastError = s.message;
  return CMASK_ERROR;
}

static cmask_status invalid(const char *message) {
  lastError = message;
  return CMASK_ERROR;
}

const char *cmask_last_error(void) { return lastError.c_str(); }

const char *cmask_abi(void) {
  static const std::string text = [] {
    std::string out = "{\"structs\":{";
    const char *structSep = "";
    // Each structure of cmask_runtime_structs.def: its size and its fields'
    // types and offsets, as this library was compiled with them.
#define CMASK_STRUCT_BEGIN(name)                                               \
  {                                                                            \
    using S = name;                                                            \
    out += std::string(structSep) +                                            \
           "\"" #name "\":{\"size\":" + std::to_string(sizeof(S)) +            \
           ",\"fields\":[";                                                    \
    structSep = ",";                                                           \
    const char *fieldSep = "";
#define CMASK_FIELD(type, field)                                               \
  out += std::string(fieldSep) + "[\"" #field "\",\"" #type "\"," +            \
         std::to_string(offsetof(S, field)) + "]";                             \
  fieldSep = ",";
#define CMASK_STRUCT_END(name)                                                 \
  out += "]}";                                                                 \
  }
#include "cmask_runtime/cmask_runtime_structs.def"
#undef CMASK_STRUCT_BEGIN
#undef CMASK_FIELD
#undef CMASK_STRUCT_END
    auto value = [](const char *name, long v) {
      return std::string("\"") + name + "\":" + std::to_string(v);
    };
    out += "},\"enums\":{\"cmask_status\":{" + value("CMASK_OK", CMASK_OK) +
           "," + value("CMASK_ERROR", CMASK_ERROR) +
           "},\"cmask_metadata_role\":{" +
           value("CMASK_ROLE_SCALAR", CMASK_ROLE_SCALAR) + "," +
           value("CMASK_ROLE_PER_SEQUENCE", CMASK_ROLE_PER_SEQUENCE) + "," +
           value("CMASK_ROLE_OFFSETS", CMASK_ROLE_OFFSETS) +
           "},\"cmask_dtype\":{" + value("CMASK_BF16", CMASK_BF16) + "," +
           value("CMASK_F16", CMASK_F16) + "}},\"tile_entry\":{";
    const char *sep = "";
    for (auto [name, f] :
         {std::pair<const char *, abi::EntryField>{"tile", abi::kEntryTile},
          {"state", abi::kEntryState},
          {"first_slot", abi::kEntryFirstSlot},
          {"slot_count", abi::kEntrySlotCount}}) {
      out += std::string(sep) + "\"" + name + "\":[" + std::to_string(f.shift) +
             "," + std::to_string(f.width) + "]";
      sep = ",";
    }
    out += "}," + value("kernel_abi_version", abi::kVersion) + "," +
           value("manifest_format", abi::kManifestFormat) + "}";
    return out;
  }();
  return text.c_str();
}

cmask_status cmask_artifact_load(const char *dir, int device,
                                 cmask_artifact **out) {
  if (!dir || !out)
    return invalid("cmask_artifact_load: null argument");
  auto a = std::make_unique<cmask_artifact>();
  if (cmask_status s = report(Artifact::load(dir, device, a->impl));
      s != CMASK_OK)
    return s;
  *out = a.release();
  return CMASK_OK;
}

cmask_status cmask_artifact_check(const char *dir) {
  if (!dir)
    return invalid("cmask_artifact_check: null argument");
  return report(Artifact::check(dir));
}

void cmask_artifact_destroy(cmask_artifact *artifact) { delete artifact; }

int cmask_artifact_num_metadata(const cmask_artifact *a) {
  return a ? static_cast<int>(a->impl->getMetadata().size()) : -1;
}

static bool validIndex(const cmask_artifact *a, int i, size_t n) {
  return a && i >= 0 && static_cast<size_t>(i) < n;
}

const char *cmask_artifact_metadata_name(const cmask_artifact *a, int i) {
  if (!validIndex(a, i, a ? a->impl->getMetadata().size() : 0))
    return nullptr;
  return a->impl->getMetadata()[i].first.c_str();
}

int cmask_artifact_metadata_role(const cmask_artifact *a, int i) {
  if (!validIndex(a, i, a ? a->impl->getMetadata().size() : 0))
    return -1;
  return static_cast<int>(a->impl->getMetadata()[i].second);
}

/// The direction `direction` (0 rows, 1 columns) of `a`, or null.
static const Artifact::Direction *directionOf(const cmask_artifact *a,
                                              int direction) {
  if (!a)
    return nullptr;
  return direction == 0   ? &a->impl->getRows()
         : direction == 1 ? a->impl->getColumns()
                          : nullptr;
}

const char *cmask_artifact_column_mode(const cmask_artifact *a) {
  return a ? a->impl->getColumnMode().c_str() : nullptr;
}

int64_t cmask_artifact_num_slots(const cmask_artifact *a, int direction) {
  const Artifact::Direction *dir = directionOf(a, direction);
  return dir ? dir->numSlots : -1;
}

int cmask_artifact_num_tile_shapes(const cmask_artifact *a, int direction) {
  const Artifact::Direction *dir = directionOf(a, direction);
  return dir ? static_cast<int>(dir->shapes.size()) : -1;
}

cmask_status cmask_artifact_tile_shape(const cmask_artifact *a, int direction,
                                       int i, int64_t *q, int64_t *k) {
  const Artifact::Direction *dir = directionOf(a, direction);
  if (!q || !k || !dir || i < 0 || static_cast<size_t>(i) >= dir->shapes.size())
    return invalid("cmask_artifact_tile_shape: bad handle, direction or index");
  *q = dir->shapes[i].q;
  *k = dir->shapes[i].k;
  return CMASK_OK;
}

static Bounds boundsOf(const cmask_bounds &b) {
  return {b.num_seqs,     b.total_q, b.max_seqlen_k,
          b.columns != 0, b.total_k, b.max_seqlen_q};
}

cmask_status cmask_descriptor_create(const cmask_artifact *a,
                                     const cmask_bounds *bounds,
                                     cmask_descriptor **out) {
  return cmask_descriptor_create_at(a, bounds, 0, 0, out);
}

cmask_status cmask_descriptor_bytes(const cmask_artifact *a,
                                    const cmask_bounds *bounds,
                                    uint64_t *bytes) {
  if (!a || !bounds || !bytes)
    return invalid("cmask_descriptor_bytes: null argument");
  size_t n = 0;
  if (cmask_status s = report(a->impl->descriptorBytes(boundsOf(*bounds), n));
      s != CMASK_OK)
    return s;
  *bytes = n;
  return CMASK_OK;
}

cmask_status cmask_descriptor_create_at(const cmask_artifact *a,
                                        const cmask_bounds *bounds,
                                        uint64_t storage, uint64_t bytes,
                                        cmask_descriptor **out) {
  if (!a || !bounds || !out)
    return invalid("cmask_descriptor_create: null argument");
  auto d = std::make_unique<cmask_descriptor>();
  if (cmask_status s = report(a->impl->createDescriptor(
          boundsOf(*bounds), d->impl, storage, static_cast<size_t>(bytes)));
      s != CMASK_OK)
    return s;
  *out = d.release();
  return CMASK_OK;
}

cmask_status cmask_descriptor_set_batch(const cmask_artifact *a,
                                        cmask_descriptor *d, int32_t numSeqs,
                                        int64_t totalQ, int64_t totalK,
                                        uint64_t cuSeqlensQ,
                                        uint64_t cuSeqlensK) {
  if (!a || !d)
    return invalid("cmask_descriptor_set_batch: null argument");
  return report(a->impl->setBatch(d->impl, numSeqs, totalQ, totalK, cuSeqlensQ,
                                  cuSeqlensK));
}

void cmask_descriptor_destroy(cmask_descriptor *d) { delete d; }

/// The buffers of direction `direction` of `d`, or null.
static const DirectionBuffers *buffersOf(const cmask_descriptor *d,
                                         int direction) {
  if (!d)
    return nullptr;
  return direction == 0                             ? &d->impl.rows
         : direction == 1 && d->impl.bounds.columns ? &d->impl.columns
                                                    : nullptr;
}

uint64_t cmask_descriptor_intervals(const cmask_descriptor *d, int direction) {
  const DirectionBuffers *b = buffersOf(d, direction);
  return b ? b->intervals.get() : 0;
}

uint64_t cmask_descriptor_error_flags(const cmask_descriptor *d) {
  return d ? d->impl.error.get() : 0;
}

cmask_status cmask_descriptor_tiles(const cmask_descriptor *d, int direction,
                                    int shape, cmask_tile_view *out) {
  const DirectionBuffers *b = buffersOf(d, direction);
  if (!b || !out || shape < 0 || static_cast<size_t>(shape) >= b->tiles.size())
    return invalid("cmask_descriptor_tiles: no such direction or tile shape");
  const TileBuffers &t = b->tiles[shape];
  *out = {t.qTileBase.get(), t.qTileSeq.get(),    t.counts.get(),
          t.tileState.get(), t.tileOffsets.get(), t.tileEntries.get(),
          t.tileOrder.get(), t.nktWords,          t.maxQTiles};
  return CMASK_OK;
}

cmask_status cmask_preprocess_window(const cmask_artifact *a,
                                     cmask_descriptor *d, int32_t numSeqs,
                                     int64_t totalQ, int64_t totalK,
                                     uint64_t cuSeqlensQ, uint64_t cuSeqlensK,
                                     const cmask_metadata_arg *metadata,
                                     int numMetadata, void *stream, int checked,
                                     int windowQ, int windowK) {
  if (!a || !d || (numMetadata > 0 && !metadata) || numMetadata < 0)
    return invalid("cmask_preprocess: null argument");
  std::vector<MetadataArg> args;
  for (int k = 0; k < numMetadata; ++k)
    args.push_back({metadata[k].scalar, metadata[k].values,
                    metadata[k].num_values, metadata[k].starts});
  return report(a->impl->preprocess(d->impl, numSeqs, totalQ, totalK,
                                    cuSeqlensQ, cuSeqlensK, args,
                                    static_cast<CUstream>(stream), checked != 0,
                                    Windows{windowQ != 0, windowK != 0}));
}

cmask_status cmask_preprocess(const cmask_artifact *a, cmask_descriptor *d,
                              int32_t numSeqs, int64_t totalQ, int64_t totalK,
                              uint64_t cuSeqlensQ, uint64_t cuSeqlensK,
                              const cmask_metadata_arg *metadata,
                              int numMetadata, void *stream, int checked) {
  return cmask_preprocess_window(a, d, numSeqs, totalQ, totalK, cuSeqlensQ,
                                 cuSeqlensK, metadata, numMetadata, stream,
                                 checked, 0, 0);
}

cmask_status cmask_read_error_flags(const cmask_artifact *a,
                                    cmask_descriptor *d, void *stream,
                                    int32_t *flags) {
  if (!a || !d || !flags)
    return invalid("cmask_read_error_flags: null argument");
  return report(
      a->impl->readErrorFlags(d->impl, static_cast<CUstream>(stream), *flags));
}

int cmask_artifact_has_attention(const cmask_artifact *a) {
  return a && a->impl->hasAttention() ? 1 : 0;
}

const char *cmask_artifact_attention_unavailable(const cmask_artifact *a) {
  return a ? a->impl->getAttentionUnavailable().c_str() : nullptr;
}

int cmask_artifact_default_attention_shape(const cmask_artifact *a) {
  return a ? a->impl->getDefaultAttentionShape() : -1;
}

int cmask_attention_tile_shape(const cmask_artifact *a,
                               const cmask_descriptor *d) {
  return a && d ? a->impl->attentionShape(d->impl) : -1;
}

int cmask_artifact_num_attention_kernels(const cmask_artifact *a) {
  return a ? static_cast<int>(a->impl->getAttentionKernels().size()) : -1;
}

cmask_status cmask_artifact_attention_kernel(const cmask_artifact *a, int i,
                                             int *dtype, int64_t *headDim,
                                             int *shape) {
  if (!a || !dtype || !headDim || !shape)
    return invalid("cmask_artifact_attention_kernel: null argument");
  const auto &kernels = a->impl->getAttentionKernels();
  if (i < 0 || static_cast<size_t>(i) >= kernels.size())
    return invalid("cmask_artifact_attention_kernel: index out of range");
  *dtype = kernels[i].dtype == DType::BF16 ? CMASK_BF16 : CMASK_F16;
  *headDim = kernels[i].headDim;
  *shape = kernels[i].shape;
  return CMASK_OK;
}

static bool toView(const cmask_tensor &t, TensorView &out) {
  if (t.dtype != CMASK_BF16 && t.dtype != CMASK_F16)
    return false;
  out = {t.data,       t.dtype == CMASK_BF16 ? DType::BF16 : DType::F16,
         t.tokens,     t.heads,
         t.head_dim,   t.token_stride,
         t.head_stride};
  return true;
}

cmask_status cmask_attention_forward(const cmask_artifact *a,
                                     const cmask_descriptor *d,
                                     const cmask_attention_args *args,
                                     void *stream) {
  if (!a || !d || !args)
    return invalid("cmask_attention_forward: null argument");
  AttentionArgs x;
  if (!toView(args->q, x.q) || !toView(args->k, x.k) || !toView(args->v, x.v) ||
      !toView(args->out, x.out))
    return invalid(
        "cmask_attention_forward: dtype is not CMASK_BF16 or CMASK_F16");
  x.lse = args->lse;
  x.scale = args->scale;
  x.tileShape = args->tile_shape;
  x.stats = args->stats;
  if (args->schedule < 0 || args->schedule > 2)
    return report(Status::error("cmask_attention_forward: schedule " +
                                std::to_string(args->schedule) +
                                " (0: auto, 1: grid, 2: persistent)"));
  x.schedule = static_cast<Schedule>(args->schedule);
  if (args->gqa_packing < 0 || args->gqa_packing > 2)
    return report(Status::error("cmask_attention_forward: gqa_packing " +
                                std::to_string(args->gqa_packing) +
                                " (0: auto, 1: off, 2: on)"));
  x.gqaPacking = static_cast<GqaPacking>(args->gqa_packing);
  if (args->section_heads < 0)
    return report(Status::error("cmask_attention_forward: section_heads " +
                                std::to_string(args->section_heads) +
                                " (0: the runtime's choice, or at least 1)"));
  x.sectionHeads = args->section_heads;
  return report(
      a->impl->attentionForward(d->impl, x, static_cast<CUstream>(stream)));
}

size_t cmask_backward_scratch_bytes(int64_t totalQ, int64_t numSeqs,
                                    int64_t heads, int64_t headDim) {
  return backwardScratchBytes(totalQ, numSeqs, heads, headDim);
}

cmask_status cmask_attention_backward(const cmask_artifact *a,
                                      const cmask_descriptor *d,
                                      const cmask_backward_args *args,
                                      void *stream) {
  if (!a || !d || !args)
    return invalid("cmask_attention_backward: null argument");
  BackwardArgs x;
  if (!toView(args->q, x.q) || !toView(args->k, x.k) || !toView(args->v, x.v) ||
      !toView(args->out, x.out) || !toView(args->dout, x.dout) ||
      !toView(args->dq, x.dq) || !toView(args->dk, x.dk) ||
      !toView(args->dv, x.dv))
    return invalid(
        "cmask_attention_backward: dtype is not CMASK_BF16 or CMASK_F16");
  x.lse = args->lse;
  x.scratch = args->scratch;
  x.scale = args->scale;
  x.deterministic = args->deterministic != 0;
  x.maxSeqlenQ = args->max_seqlen_q;
  return report(
      a->impl->attentionBackward(d->impl, x, static_cast<CUstream>(stream)));
}
