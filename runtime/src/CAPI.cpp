//===- CAPI.cpp - C API of the cmask runtime ------------------------------===//

#include "cmask_runtime/cmask_runtime.h"

#include "cmask_runtime/Runtime.h"

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

cmask_status cmask_artifact_load(const char *dir, int device,
                                 cmask_artifact **out) {
  if (!dir || !out)
    return invalid("cmask_artifact_load: null argument");
  auto a = std::make_unique<cmask_artifact>();
  if (cmask_status s = report(Artifact::load(dir, device, a->impl)); s != CMASK_OK)
    return s;
  *out = a.release();
  return CMASK_OK;
}

void cmask_artifact_destroy(cmask_artifact *artifact) { delete artifact; }

int64_t cmask_artifact_num_slots(const cmask_artifact *a) {
  return a ? a->impl->getNumSlots() : -1;
}

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

int cmask_artifact_num_tile_shapes(const cmask_artifact *a) {
  return a ? static_cast<int>(a->impl->getShapes().size()) : -1;
}

cmask_status cmask_artifact_tile_shape(const cmask_artifact *a, int i,
                                       int64_t *q, int64_t *k) {
  if (!q || !k || !validIndex(a, i, a ? a->impl->getShapes().size() : 0))
    return invalid("cmask_artifact_tile_shape: bad handle or index");
  *q = a->impl->getShapes()[i].q;
  *k = a->impl->getShapes()[i].k;
  return CMASK_OK;
}

cmask_status cmask_descriptor_create(const cmask_artifact *a, int32_t numSeqs,
                                     int64_t totalQ, int64_t maxSeqlenK,
                                     cmask_descriptor **out) {
  if (!a || !out)
    return invalid("cmask_descriptor_create: null argument");
  auto d = std::make_unique<cmask_descriptor>();
  if (cmask_status s = report(
          a->impl->createDescriptor({numSeqs, totalQ, maxSeqlenK}, d->impl));
      s != CMASK_OK)
    return s;
  *out = d.release();
  return CMASK_OK;
}

void cmask_descriptor_destroy(cmask_descriptor *d) { delete d; }

uint64_t cmask_descriptor_intervals(const cmask_descriptor *d) {
  return d ? d->impl.intervals.get() : 0;
}

uint64_t cmask_descriptor_error_flags(const cmask_descriptor *d) {
  return d ? d->impl.error.get() : 0;
}

cmask_status cmask_descriptor_tiles(const cmask_descriptor *d, int shape,
                                    cmask_tile_view *out) {
  if (!d || !out || shape < 0 ||
      static_cast<size_t>(shape) >= d->impl.tiles.size())
    return invalid("cmask_descriptor_tiles: no such tile shape");
  const TileBuffers &t = d->impl.tiles[shape];
  *out = {t.qTileBase.get(),   t.qTileSeq.get(),    t.counts.get(),
          t.tileState.get(),   t.tileOffsets.get(), t.tileEntries.get(),
          t.tileOrder.get(),   t.nktWords,          t.maxQTiles};
  return CMASK_OK;
}

cmask_status cmask_preprocess(const cmask_artifact *a, cmask_descriptor *d,
                              int32_t numSeqs, int64_t totalQ,
                              uint64_t cuSeqlensQ, uint64_t cuSeqlensK,
                              const cmask_metadata_arg *metadata,
                              int numMetadata, void *stream, int checked) {
  if (!a || !d || (numMetadata > 0 && !metadata) || numMetadata < 0)
    return invalid("cmask_preprocess: null argument");
  std::vector<MetadataArg> args;
  for (int k = 0; k < numMetadata; ++k)
    args.push_back({metadata[k].scalar, metadata[k].values,
                    metadata[k].num_values, metadata[k].starts});
  return report(a->impl->preprocess(d->impl, numSeqs, totalQ, cuSeqlensQ,
                                    cuSeqlensK, args,
                                    static_cast<CUstream>(stream), checked != 0));
}

cmask_status cmask_read_error_flags(const cmask_artifact *a,
                                    cmask_descriptor *d, void *stream,
                                    int32_t *flags) {
  if (!a || !d || !flags)
    return invalid("cmask_read_error_flags: null argument");
  return report(a->impl->readErrorFlags(d->impl, static_cast<CUstream>(stream),
                                        *flags));
}
