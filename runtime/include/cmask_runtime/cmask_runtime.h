/*===- cmask_runtime.h - C API of the cmask runtime ---------------*- C -*-===*\
|*                                                                            *|
|* For bindings (ctypes, nanobind, other languages). Device pointers and     *|
|* streams are passed as integers / opaque pointers (CUdeviceptr, CUstream),  *|
|* so the header needs no CUDA include. Every call returns CMASK_OK or        *|
|* CMASK_ERROR; cmask_last_error() gives the message of this thread's last   *|
|* error.                                                                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CMASK_RUNTIME_CMASK_RUNTIME_H
#define CMASK_RUNTIME_CMASK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CMASK_OK = 0, CMASK_ERROR = 1 } cmask_status;
typedef enum {
  CMASK_ROLE_SCALAR = 0,
  CMASK_ROLE_PER_SEQUENCE = 1,
  CMASK_ROLE_OFFSETS = 2
} cmask_metadata_role;

typedef struct cmask_artifact cmask_artifact;
typedef struct cmask_descriptor cmask_descriptor;

/* Attention (docs/attention.md). */
typedef enum { CMASK_BF16 = 0, CMASK_F16 = 1 } cmask_dtype;

/* The structures: cmask_metadata_arg, cmask_bounds, cmask_tile_view,
 * cmask_tensor, cmask_attention_args, cmask_backward_args, each field with
 * its meaning in cmask_runtime_structs.def. */
#define CMASK_STRUCT_BEGIN(name) typedef struct name {
#define CMASK_FIELD(type, field) type field;
#define CMASK_STRUCT_END(name)                                                 \
  }                                                                            \
  name;
#include "cmask_runtime/cmask_runtime_structs.def"
#undef CMASK_STRUCT_BEGIN
#undef CMASK_FIELD
#undef CMASK_STRUCT_END

/* The library's description of its structures, enums and descriptor
 * encoding, as JSON (static storage): {"structs": {name: {"size", "fields":
 * [[name, type, offset], ...]}}, "enums": {...}, "tile_entry": {field:
 * [shift, width]}, "kernel_abi_version", "manifest_format"}. Bindings build
 * their structures from it. */
const char *cmask_abi(void);

/* Directions, in the calls that take one: 0 = rows (query rows over keys),
 * 1 = columns (keys over query rows, for the backward pass;
 * docs/descriptor.md). */

const char *cmask_last_error(void);

cmask_status cmask_artifact_load(const char *dir, int device,
                                 cmask_artifact **out);
/* Reads and checks DIR/manifest.json as cmask_artifact_load does (format,
 * structure, every kernel's arguments against this runtime's), without a
 * device or any CUDA call. */
cmask_status cmask_artifact_check(const char *dir);
void cmask_artifact_destroy(cmask_artifact *artifact);
/* The getters return -1 / NULL for a null handle, a direction the artifact
 * lacks (columns when the column mode is "rows") or an index out of range. */
int cmask_artifact_num_metadata(const cmask_artifact *artifact);
const char *cmask_artifact_metadata_name(const cmask_artifact *artifact, int i);
int cmask_artifact_metadata_role(const cmask_artifact *artifact, int i);
/* "derived", "symmetric" or "rows". */
const char *cmask_artifact_column_mode(const cmask_artifact *artifact);
int64_t cmask_artifact_num_slots(const cmask_artifact *artifact, int direction);
int cmask_artifact_num_tile_shapes(const cmask_artifact *artifact,
                                   int direction);
/// Tile shape i of a direction: its rows (q) and columns (k) per tile (in
/// the column direction, keys by queries).
cmask_status cmask_artifact_tile_shape(const cmask_artifact *artifact,
                                       int direction, int i, int64_t *q,
                                       int64_t *k);

cmask_status cmask_descriptor_create(const cmask_artifact *artifact,
                                     const cmask_bounds *bounds,
                                     cmask_descriptor **out);
/* Bytes of a descriptor's storage for `bounds` (host arithmetic). */
cmask_status cmask_descriptor_bytes(const cmask_artifact *artifact,
                                    const cmask_bounds *bounds,
                                    uint64_t *bytes);
/* A descriptor whose buffers lie in device memory the caller owns (e.g. a
 * PyTorch tensor): `storage`, 256-byte aligned, of at least
 * cmask_descriptor_bytes bytes, kept alive while the descriptor is used.
 * It allocates nothing, and its layout depends on (storage, bounds) only:
 * two descriptors made over the same storage and bounds are the same. */
cmask_status cmask_descriptor_create_at(const cmask_artifact *artifact,
                                        const cmask_bounds *bounds,
                                        uint64_t storage, uint64_t bytes,
                                        cmask_descriptor **out);
void cmask_descriptor_destroy(cmask_descriptor *descriptor);
/* Declares the batch the descriptor's storage holds (built by an earlier
 * cmask_preprocess into the same storage and bounds), so that attention
 * calls on a descriptor made anew over that storage read it. */
cmask_status cmask_descriptor_set_batch(const cmask_artifact *artifact,
                                        cmask_descriptor *descriptor,
                                        int32_t num_seqs, int64_t total_q,
                                        int64_t total_k, uint64_t cu_seqlens_q,
                                        uint64_t cu_seqlens_k);
/* 0 for a direction the descriptor was not created with. */
uint64_t cmask_descriptor_intervals(const cmask_descriptor *descriptor,
                                    int direction);
/// The error flags (device int32 [1]) of checked preprocess runs.
uint64_t cmask_descriptor_error_flags(const cmask_descriptor *descriptor);
cmask_status cmask_descriptor_tiles(const cmask_descriptor *descriptor,
                                    int direction, int shape,
                                    cmask_tile_view *out);

/* Builds the descriptor's directions on `stream` (a CUstream; NULL: the
 * legacy default stream) for num_seqs sequences, total_q query rows and
 * total_k keys. One descriptor serves one stream at a time. */
cmask_status cmask_preprocess(const cmask_artifact *artifact,
                              cmask_descriptor *descriptor, int32_t num_seqs,
                              int64_t total_q, int64_t total_k,
                              uint64_t cu_seqlens_q, uint64_t cu_seqlens_k,
                              const cmask_metadata_arg *metadata,
                              int num_metadata, void *stream, int checked);
/* cmask_preprocess for a window of a batch (docs/descriptor.md, "Windows"):
 * with window_q (window_k) non-zero, cu_seqlens_q (cu_seqlens_k) is
 * followed in its buffer by int32 [2 x num_seqs], per sequence the position
 * of its first present query row (key) in the whole sequence and the whole
 * sequence's length. */
cmask_status cmask_preprocess_window(
    const cmask_artifact *artifact, cmask_descriptor *descriptor,
    int32_t num_seqs, int64_t total_q, int64_t total_k, uint64_t cu_seqlens_q,
    uint64_t cu_seqlens_k, const cmask_metadata_arg *metadata, int num_metadata,
    void *stream, int checked, int window_q, int window_k);
/// Synchronizes `stream`; the error flags of the last checked preprocess.
cmask_status cmask_read_error_flags(const cmask_artifact *artifact,
                                    cmask_descriptor *descriptor, void *stream,
                                    int32_t *flags);

/* 1 when the attention kernels can run on the artifact's device; else 0 and
 * cmask_artifact_attention_unavailable says why. */
int cmask_artifact_has_attention(const cmask_artifact *artifact);
const char *
cmask_artifact_attention_unavailable(const cmask_artifact *artifact);
int cmask_artifact_default_attention_shape(const cmask_artifact *artifact);
/* The tile shape (index) an attention call with tile_shape -1 uses on the
 * batch the descriptor was last built for: the default, or, unless the
 * artifact fixed it (--attention-tile), 128x128 on sequences of at most
 * 65536 keys on average where the default is 128x64 (docs/attention.md,
 * Choosing the tile shape); -1 where attention cannot run. */
int cmask_attention_tile_shape(const cmask_artifact *artifact,
                               const cmask_descriptor *descriptor);
int cmask_artifact_num_attention_kernels(const cmask_artifact *artifact);
/* Kernel i: its dtype, head dimension and row tile shape index. */
cmask_status cmask_artifact_attention_kernel(const cmask_artifact *artifact,
                                             int i, int *dtype,
                                             int64_t *head_dim, int *shape);

/* The forward attention of the batch the descriptor was last built for,
 * on `stream`. Arguments are checked before anything is launched. */
cmask_status cmask_attention_forward(const cmask_artifact *artifact,
                                     const cmask_descriptor *descriptor,
                                     const cmask_attention_args *args,
                                     void *stream);

/* The backward. The descriptor must hold the column direction
 * (cmask_bounds.columns) when the spec has one; a spec whose column mode is
 * "rows" uses the row direction only (query sequences up to the kernel's
 * max_seqlen_q, 524288 tokens). dk and dv are deterministic; dq is summed
 * with fp32 atomics unless `deterministic` is set: then a second pass over
 * the row direction (its 128x64 tiles) computes dq, bitwise the same run to
 * run (the backward then takes longer). args->max_seqlen_q, the batch's
 * longest query sequence (0: the descriptor's column bound, else total_q),
 * also picks how dq is accumulated: pass it exactly for the fastest path. */

/* The scratch of a backward over num_seqs sequences (the descriptor's last
 * batch) of total_q query tokens in all. */
size_t cmask_backward_scratch_bytes(int64_t total_q, int64_t num_seqs,
                                    int64_t heads, int64_t head_dim);
cmask_status cmask_attention_backward(const cmask_artifact *artifact,
                                      const cmask_descriptor *descriptor,
                                      const cmask_backward_args *args,
                                      void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CMASK_RUNTIME_CMASK_RUNTIME_H */
