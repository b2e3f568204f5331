//===- KernelABI.h - The arguments of every cmask kernel --------*- C++ -*-===//
//
// The one definition of what each GPU kernel of an artifact takes, in
// order: the compiler's builders emit the kernel signatures from these
// lists (lib/Conversion/CMaskToGPU), the artifact writer copies them into
// the manifest ("kernel_abi"), and the runtime packs every launch from
// them and refuses, when it loads an artifact, a kernel whose list in the
// manifest differs from its own (naming the first differing argument).
//
// Header-only, C++17, no CUDA, LLVM or MLIR: the compiler and the runtime
// both include it (docs/artifact.md, Kernel ABI).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_KERNELABI_H
#define CMASK_RUNTIME_KERNELABI_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cmask::abi {

/// Bumped when the meaning of a kind or of the lists' layout changes.
/// 2: the dQ accumulator's first contribution per unit is stored, not
/// added (backward::dq_units): the pre-pass zeroes the units' words instead
/// of the accumulator.
inline constexpr int kVersion = 2;

/// The format of manifest.json (docs/artifact.md) that the artifact writer
/// writes and the runtime reads.
/// 6: the backward's `_dq` kernel converts backward_dq::kFloat4sPerThread
/// float4s per thread (5 launched one per float4).
/// 7: the attention kernels in several modules ("attention.modules", one
/// per element type and head dimension; each kernel names its "module"),
/// where 6 had one ("attention.files").
/// 8: the preprocess as "preprocess_kernels", each running several stages
/// in one launch (stageBlocks) with a trailing `sync` buffer, where 7 had
/// "stages" of one-stage kernels.
inline constexpr int kManifestFormat = 8;

/// How an argument is passed, in the kernel's parameter space.
enum class ArgKind : uint8_t {
  Pointer,   ///< a device pointer (8 bytes)
  TensorMap, ///< a CUtensorMap by value: 128 bytes, 64-aligned grid constant
  I32,
  I64,
  F32,
  Index,  ///< an item count (a 64-bit MLIR index)
  Buffer, ///< an int32 buffer as MLIR's memref<?xi32> descriptor (below)
};

/// MLIR's descriptor of a memref<?xi32> (the preprocess kernels' buffers).
struct BufferDescriptor {
  uint64_t allocated, aligned, offset, size, stride;
};

constexpr const char *stringify(ArgKind kind) {
  switch (kind) {
  case ArgKind::Pointer:
    return "pointer";
  case ArgKind::TensorMap:
    return "tensor_map";
  case ArgKind::I32:
    return "i32";
  case ArgKind::I64:
    return "i64";
  case ArgKind::F32:
    return "f32";
  case ArgKind::Index:
    return "index";
  case ArgKind::Buffer:
    return "buffer";
  }
  return "?";
}

inline std::optional<ArgKind> parseArgKind(const std::string &text) {
  for (ArgKind kind :
       {ArgKind::Pointer, ArgKind::TensorMap, ArgKind::I32, ArgKind::I64,
        ArgKind::F32, ArgKind::Index, ArgKind::Buffer})
    if (text == stringify(kind))
      return kind;
  return std::nullopt;
}

/// Bytes of an argument in the parameter space.
constexpr size_t sizeOf(ArgKind kind) {
  switch (kind) {
  case ArgKind::TensorMap:
    return 128;
  case ArgKind::I32:
  case ArgKind::F32:
    return 4;
  case ArgKind::Buffer:
    return sizeof(BufferDescriptor);
  default:
    return 8;
  }
}

/// Alignment of an argument in the parameter space.
constexpr size_t alignOf(ArgKind kind) {
  switch (kind) {
  case ArgKind::TensorMap:
    return 64;
  case ArgKind::I32:
  case ArgKind::F32:
    return 4;
  default:
    return 8;
  }
}

struct Arg {
  const char *name;
  ArgKind kind;
};

/// A fixed argument list: the kernels of one kind all take it.
struct Signature {
  const char *name; ///< what the kernels are (e.g. "attention_forward")
  const Arg *args;
  int size;
};

/// An argument of a list built from the artifact (the preprocess stage
/// kernels, whose arguments depend on the spec's metadata and phases).
struct NamedArg {
  std::string name;
  ArgKind kind;
  bool operator==(const NamedArg &other) const {
    return name == other.name && kind == other.kind;
  }
};

inline std::vector<NamedArg> toList(const Signature &s,
                                    const std::string &prefix = "") {
  std::vector<NamedArg> out;
  for (int k = 0; k < s.size; ++k)
    out.push_back({prefix + s.args[k].name, s.args[k].kind});
  return out;
}

// An argument list is written once, as X(Enumerator, "name", Kind) entries;
// CMASK_ABI_SIGNATURE makes a namespace with the enumerators (the index of
// each argument), kArgs and kSignature.
#define CMASK_ABI_ENUMERATOR(id, name, kind) id,
#define CMASK_ABI_ENTRY(id, name, kind) ::cmask::abi::Arg{name, ArgKind::kind},
#define CMASK_ABI_SIGNATURE(ns, abiName, LIST)                                 \
  namespace ns {                                                               \
  enum Index : int { LIST(CMASK_ABI_ENUMERATOR) kNumArgs };                    \
  inline constexpr ::cmask::abi::Arg kArgs[] = {LIST(CMASK_ABI_ENTRY)};        \
  inline constexpr ::cmask::abi::Signature kSignature{abiName, kArgs,          \
                                                      kNumArgs};               \
  }

//===----------------------------------------------------------------------===//
// Attention (docs/attention.md)
//===----------------------------------------------------------------------===//

/// The TMA boxes the attention kernels expect of their tensor-map arguments:
/// the runtime encodes them, the builders declare them.
namespace tensor_map {
/// Q, K, V, dO: [tokens, heads, head_dim] (bf16/f16) in boxes of
/// rows x 1 x kColumns, 128B swizzle. Rows: kRingRows (the forward's Q and
/// V, the backward's streamed tiles), kFixedRows (the backward's fixed
/// tile), or the forward's key tile (its K).
inline constexpr unsigned kColumns = 64;
inline constexpr unsigned kRingRows = 64;
inline constexpr unsigned kFixedRows = 128;
/// mlse, delta: fp32 [heads, ld_stride] in boxes of kRowValues x 1: a query
/// tile's 64 rows from its first row rounded down to a multiple of 4 (a box
/// must start 16-byte aligned).
inline constexpr unsigned kRowValues = 68;
} // namespace tensor_map

/// The forward; tile lists of the row direction's shape. Grid: one CTA per
/// work item (query tiles of the bound x heads), or, for a kernel of the
/// persistent schedule, at most one per SM, each CTA taking items until none
/// is left. scheduler (persistent kernels; the others ignore it): two int32
/// counters (the next item past the grid, the CTAs done), zero before a
/// launch and left zero after it (the last CTA resets them); launches that
/// run at the same time need distinct counters. section_heads (persistent
/// kernels; 1 to num_heads: the kernel multiplies it by the query tiles in
/// 32 bits): the items come in sections of that many heads
/// (rt::launchSectionHeads, Schedule.h; the last section may be smaller).
/// q_pack_shift (GQA packing, docs/attention.md): 0, or log2 of kv_group
/// (at most 6): a work item's 128 rows are then kv_group query heads of one
/// KV head times 128 / kv_group positions, row r at position r / kv_group,
/// head r % kv_group; tm_q's boxes are then 64 columns x kv_group heads x
/// 64 / kv_group positions.
#define CMASK_ABI_ATTENTION_FORWARD(X)                                         \
  X(TmQ, "tm_q", TensorMap)                                                    \
  X(TmK, "tm_k", TensorMap)                                                    \
  X(TmV, "tm_v", TensorMap)                                                    \
  X(Out, "out", Pointer)                                                       \
  X(Lse, "lse", Pointer)                                                       \
  X(CuSeqlensQ, "cu_seqlens_q", Pointer)                                       \
  X(CuSeqlensK, "cu_seqlens_k", Pointer)                                       \
  X(Intervals, "intervals", Pointer)                                           \
  X(QTileSeq, "q_tile_seq", Pointer)                                           \
  X(QTileBase, "q_tile_base", Pointer)                                         \
  X(Counts, "counts", Pointer)                                                 \
  X(TileOffsets, "tile_offsets", Pointer)                                      \
  X(TileEntries, "tile_entries", Pointer)                                      \
  X(TileWindows, "tile_windows", Pointer)                                      \
  X(PartialCounts, "partial_counts", Pointer)                                  \
  X(TileOrder, "tile_order", Pointer)                                          \
  X(Stats, "stats", Pointer)                                                   \
  X(Scheduler, "scheduler", Pointer)                                           \
  X(NumHeads, "num_heads", I32)                                                \
  X(KvGroup, "kv_group", I32)                                                  \
  X(QPackShift, "q_pack_shift", I32)                                           \
  X(SectionHeads, "section_heads", I32)                                        \
  X(OTokenStride, "o_token_stride", I64)                                       \
  X(OHeadStride, "o_head_stride", I64)                                         \
  X(TotalQ, "total_q", I64)                                                    \
  X(ScaleLog2, "scale_log2", F32)
CMASK_ABI_SIGNATURE(forward, "attention_forward", CMASK_ABI_ATTENTION_FORWARD)

/// The backward's pre-pass `<name>_pre`: delta = rowsum(dO * O) and
/// mlse = -LSE log2(e), fp32 [heads, ld_stride]; and zero_float4s float4s
/// at `zero` zeroed, kZeroFloat4sPerThread per thread: the dQ accumulator's
/// units' words (backward::firstStoreFor), else the accumulator (0: none, as
/// deterministic= leaves it).
#define CMASK_ABI_ATTENTION_BACKWARD_PRE(X)                                    \
  X(O, "o", Pointer)                                                           \
  X(DO, "do", Pointer)                                                         \
  X(Lse, "lse", Pointer)                                                       \
  X(Mlse, "mlse", Pointer)                                                     \
  X(Delta, "delta", Pointer)                                                   \
  X(TotalQ, "total_q", I64)                                                    \
  X(NumHeads, "num_heads", I32)                                                \
  X(LdStride, "ld_stride", I64)                                                \
  X(OTokenStride, "o_token_stride", I64)                                       \
  X(OHeadStride, "o_head_stride", I64)                                         \
  X(DOTokenStride, "do_token_stride", I64)                                     \
  X(DOHeadStride, "do_head_stride", I64)                                       \
  X(Zero, "zero", Pointer)                                                     \
  X(ZeroFloat4s, "zero_float4s", I64)
CMASK_ABI_SIGNATURE(backward_pre, "attention_backward_pre",
                    CMASK_ABI_ATTENTION_BACKWARD_PRE)
namespace backward_pre {
/// Threads per CTA (one-dimensional grid over rows x heads x D / 8, or
/// over the zeroed float4s / kZeroFloat4sPerThread where that is more).
inline constexpr unsigned kThreads = 128;
/// Consecutive float4s each thread zeroes.
inline constexpr int64_t kZeroFloat4sPerThread = 2;
/// Threads of a launch: enough for both jobs.
inline constexpr int64_t threadsFor(int64_t totalQ, int64_t heads,
                                    int64_t headDim, int64_t accFloat4s) {
  int64_t rows = totalQ * heads * (headDim / 8);
  int64_t zero =
      (accFloat4s + kZeroFloat4sPerThread - 1) / kZeroFloat4sPerThread;
  return rows > zero ? rows : zero;
}
} // namespace backward_pre

// The arguments both main backward kernels begin and end with.
#define CMASK_ABI_ATTENTION_BACKWARD_HEAD(X)                                   \
  X(TmQ, "tm_q", TensorMap)                                                    \
  X(TmK, "tm_k", TensorMap)                                                    \
  X(TmV, "tm_v", TensorMap)                                                    \
  X(TmDO, "tm_do", TensorMap)                                                  \
  X(TmMlse, "tm_mlse", TensorMap)                                              \
  X(TmDelta, "tm_delta", TensorMap)                                            \
  X(DQAccumulator, "dq_accumulator", Pointer)                                  \
  X(DK, "dk", Pointer)                                                         \
  X(DV, "dv", Pointer)                                                         \
  X(CuSeqlensQ, "cu_seqlens_q", Pointer)                                       \
  X(CuSeqlensK, "cu_seqlens_k", Pointer)                                       \
  X(Intervals, "intervals", Pointer)
#define CMASK_ABI_ATTENTION_BACKWARD_TAIL(X)                                   \
  X(DKTokenStride, "dk_token_stride", I64)                                     \
  X(DKHeadStride, "dk_head_stride", I64)                                       \
  X(DVTokenStride, "dv_token_stride", I64)                                     \
  X(DVHeadStride, "dv_head_stride", I64)                                       \
  X(TotalQ, "total_q", I64)                                                    \
  X(ScaleLog2, "scale_log2", F32)                                              \
  X(Scale, "scale", F32)

/// The main backward kernel over the column direction: a CTA per (key tile
/// of the bound, key/value head) walks the column tile lists.
#define CMASK_ABI_ATTENTION_BACKWARD(X)                                        \
  CMASK_ABI_ATTENTION_BACKWARD_HEAD(X)                                         \
  X(KTileSeq, "k_tile_seq", Pointer)                                           \
  X(KTileBase, "k_tile_base", Pointer)                                         \
  X(Counts, "counts", Pointer)                                                 \
  X(TileOffsets, "tile_offsets", Pointer)                                      \
  X(TileEntries, "tile_entries", Pointer)                                      \
  X(TileOrder, "tile_order", Pointer)                                          \
  X(DQUnits, "dq_units", Pointer)                                              \
  X(NumHeads, "num_heads", I32)                                                \
  X(KvGroup, "kv_group", I32)                                                  \
  CMASK_ABI_ATTENTION_BACKWARD_TAIL(X)
CMASK_ABI_SIGNATURE(backward, "attention_backward",
                    CMASK_ABI_ATTENTION_BACKWARD)
namespace backward {
/// The dQ accumulator in units of kUnitBytes (16 rows x 64 columns of fp32:
/// what one warp's staging adds per step), each with a uint32 word at
/// dq_units[(byte offset in the accumulator) / kUnitBytes], zeroed by the
/// pre-pass. Where firstStore(head_dim) and the runtime passes dq_units
/// (firstStoreFor; else null), the main kernel's dQ warp counts
/// a unit's contributions in its word: the first stores its 4 KB instead
/// of adding them (the accumulator is not zeroed) and sets kReady once the
/// store has completed; the others wait for kReady, then add. The dQ pass
/// converts units whose word is not 0 and writes zeros for the others
/// (rows that see nothing). At D = 64 both warpgroups add to the same unit
/// in a step, so the accumulator is zeroed and added to as before.
inline constexpr int64_t kUnitBytes = 4096;
inline constexpr uint32_t kReady = 0x80000000u;
inline constexpr bool firstStore(int64_t headDim) { return headDim == 128; }
/// The longest query sequence (max_seqlen_q) for which the runtime passes
/// dq_units. Causal 32K ran its main kernel 10.8% slower with the first store
/// (37.4-37.8 -> 41.7-41.8 ms, forward+backward 0.92x) and causal 16K
/// forward+backward 0.97-0.98x, while 8 x 1K gained 1.03-1.05x, packed
/// documents of up to 4K tokens 1.03x and 8 x 4K measured 0.98-1.02x (H100,
/// docs/performance.md, thirty-third and thirty-fifth sessions). On an H200
/// causal and HSTU at 8K-16K measured within 1% either way and causal 32K
/// 0.85x with it (thirty-sixth): any bound from 4K to 16K costs nothing
/// measured; 4K is the longest length where the first store gained.
inline constexpr int64_t kFirstStoreMaxSeqlenQ = 4096;
/// Whether the runtime passes dq_units (else null: the accumulator zeroed
/// and added to, a path the same kernels take): where they have the first
/// store, the query heads are not grouped and no query sequence is longer
/// than kFirstStoreMaxSeqlenQ. Causal GQA 32/8 at 16K ran its main kernel
/// 5.7% slower with the first store (9.61 -> 10.16 ms, H100,
/// docs/performance.md, thirty-third session), more than the pre-pass
/// saves; without groups it was +0.5% against a pre-pass at half. Not from
/// claimants waiting for a first store: at most 1.6% of the dQ warp's steps
/// wait, at no measurable cost (thirty-fourth session); a third of it is
/// the claim's acquire, an L1 invalidation per step (thirty-fifth).
inline constexpr bool firstStoreFor(int64_t headDim, int64_t heads,
                                    int64_t kvHeads, int64_t maxSeqlenQ) {
  return firstStore(headDim) && heads == kvHeads &&
         maxSeqlenQ <= kFirstStoreMaxSeqlenQ;
}
} // namespace backward

/// The main backward kernel without a column direction: a CTA per (key/value
/// head, sequence, key tile) lists its query tiles from the row direction's
/// tile_info and masks with the row intervals.
#define CMASK_ABI_ATTENTION_BACKWARD_ROWS(X)                                   \
  CMASK_ABI_ATTENTION_BACKWARD_HEAD(X)                                         \
  X(QTileBase, "q_tile_base", Pointer)                                         \
  X(TileInfo, "tile_info", Pointer)                                            \
  X(NumHeads, "num_heads", I32)                                                \
  X(KvGroup, "kv_group", I32)                                                  \
  X(NumSeqs, "num_seqs", I32)                                                  \
  X(KeyTiles, "key_tiles", I32)                                                \
  X(InfoStride, "info_stride", I32)                                            \
  CMASK_ABI_ATTENTION_BACKWARD_TAIL(X)
CMASK_ABI_SIGNATURE(backward_rows, "attention_backward_rows",
                    CMASK_ABI_ATTENTION_BACKWARD_ROWS)

/// `<name>_dq`: dQ = scale * the fp32 accumulator, kFloat4sPerThread
/// float4s per thread; with dq_units (not null), 0 where the unit's word is
/// 0 (backward::kUnitBytes).
#define CMASK_ABI_ATTENTION_BACKWARD_DQ(X)                                     \
  X(DQAccumulator, "dq_accumulator", Pointer)                                  \
  X(DQUnits, "dq_units", Pointer)                                              \
  X(DQ, "dq", Pointer)                                                         \
  X(CuSeqlensQ, "cu_seqlens_q", Pointer)                                       \
  X(NumSeqs, "num_seqs", I32)                                                  \
  X(SearchSteps, "search_steps", I32)                                          \
  X(Float4s, "float4s", I64)                                                   \
  X(NumHeads, "num_heads", I32)                                                \
  X(DQTokenStride, "dq_token_stride", I64)                                     \
  X(DQHeadStride, "dq_head_stride", I64)                                       \
  X(Scale, "scale", F32)
CMASK_ABI_SIGNATURE(backward_dq, "attention_backward_dq",
                    CMASK_ABI_ATTENTION_BACKWARD_DQ)
namespace backward_dq {
/// Threads per CTA (one-dimensional grid over the accumulator's float4s).
inline constexpr unsigned kThreads = 128;
/// Consecutive float4s per thread (one row group and head: one decode and
/// one search of the sequence for all of them).
inline constexpr unsigned kFloat4sPerThread = 4;
} // namespace backward_dq

/// `<name>_dqr`: the deterministic dQ over the row direction's 128x64 tiles.
#define CMASK_ABI_ATTENTION_BACKWARD_DQ_ROWS(X)                                \
  X(TmQ, "tm_q", TensorMap)                                                    \
  X(TmK, "tm_k", TensorMap)                                                    \
  X(TmV, "tm_v", TensorMap)                                                    \
  X(TmDO, "tm_do", TensorMap)                                                  \
  X(DQ, "dq", Pointer)                                                         \
  X(Mlse, "mlse", Pointer)                                                     \
  X(Delta, "delta", Pointer)                                                   \
  X(CuSeqlensQ, "cu_seqlens_q", Pointer)                                       \
  X(CuSeqlensK, "cu_seqlens_k", Pointer)                                       \
  X(Intervals, "intervals", Pointer)                                           \
  X(QTileSeq, "q_tile_seq", Pointer)                                           \
  X(QTileBase, "q_tile_base", Pointer)                                         \
  X(Counts, "counts", Pointer)                                                 \
  X(TileOffsets, "tile_offsets", Pointer)                                      \
  X(TileEntries, "tile_entries", Pointer)                                      \
  X(TileOrder, "tile_order", Pointer)                                          \
  X(NumHeads, "num_heads", I32)                                                \
  X(KvGroup, "kv_group", I32)                                                  \
  X(LdStride, "ld_stride", I64)                                                \
  X(DQTokenStride, "dq_token_stride", I64)                                     \
  X(DQHeadStride, "dq_head_stride", I64)                                       \
  X(ScaleLog2, "scale_log2", F32)                                              \
  X(Scale, "scale", F32)
CMASK_ABI_SIGNATURE(backward_dq_rows, "attention_backward_dq_rows",
                    CMASK_ABI_ATTENTION_BACKWARD_DQ_ROWS)

//===----------------------------------------------------------------------===//
// The preprocess (docs/descriptor.md)
//===----------------------------------------------------------------------===//

/// The phases, in launch order.
enum class Phase {
  Check,
  Rows,
  Seqs,
  EnvInit,
  Env,
  Tiles,
  Pack,
  Count,
  Scan,
  Fill
};
inline constexpr Phase kPhases[] = {
    Phase::Check, Phase::Rows, Phase::Seqs,  Phase::EnvInit, Phase::Env,
    Phase::Tiles, Phase::Pack, Phase::Count, Phase::Scan,    Phase::Fill};

constexpr const char *stringify(Phase phase) {
  constexpr const char *names[] = {"check", "rows", "seqs",  "envinit", "env",
                                   "tiles", "pack", "count", "scan",    "fill"};
  return names[static_cast<int>(phase)];
}

inline std::optional<Phase> parsePhase(const std::string &text) {
  for (Phase phase : kPhases)
    if (text == stringify(phase))
      return phase;
  return std::nullopt;
}

/// check and rows take a direction's row group; the others its tile group
/// for one tile shape.
constexpr bool isRowPhase(Phase phase) {
  return phase == Phase::Check || phase == Phase::Rows;
}

/// The row group begins with these, then the metadata in declaration order
/// (rowGroupArgs), then its tail. In the column direction the rows are the
/// keys: cu_seqlens_rows is cu_seqlens_k there. A batch's window
/// (docs/descriptor.md, "Windows") follows its cu_seqlens in the same
/// buffer, which the row group then passes at 3 x num_seqs + 1 elements:
/// int32 [2 x num_seqs] after the num_seqs + 1 starts, per sequence the
/// position of its first present row (column) in the whole sequence and the
/// whole sequence's length (kWindowFields).
#define CMASK_ABI_ROW_GROUP_HEAD(X)                                            \
  X(NumSeqs, "num_seqs", I32)                                                  \
  X(CuSeqlensRows, "cu_seqlens_rows", Buffer)                                  \
  X(CuSeqlensCols, "cu_seqlens_cols", Buffer)
CMASK_ABI_SIGNATURE(row_group_head, "row_group_head", CMASK_ABI_ROW_GROUP_HEAD)

/// The words per sequence of a window after its cu_seqlens: (first, length).
inline constexpr int kWindowFields = 2;
#define CMASK_ABI_ROW_GROUP_TAIL(X)                                            \
  X(Intervals, "intervals", Buffer)                                            \
  X(Merged, "merged", Buffer)                                                  \
  X(Error, "error", Buffer)
CMASK_ABI_SIGNATURE(row_group_tail, "row_group_tail", CMASK_ABI_ROW_GROUP_TAIL)

/// The tile group of one direction and tile shape (docs/descriptor.md has
/// each buffer's layout).
#define CMASK_ABI_TILE_GROUP(X)                                                \
  X(NumSeqs, "num_seqs", I32)                                                  \
  X(NktWords, "nkt_words", I32)                                                \
  X(CuSeqlensRows, "cu_seqlens_rows", Buffer)                                  \
  X(CuSeqlensCols, "cu_seqlens_cols", Buffer)                                  \
  X(Intervals, "intervals", Buffer)                                            \
  X(Merged, "merged", Buffer)                                                  \
  X(QTileBase, "q_tile_base", Buffer)                                          \
  X(QTileSeq, "q_tile_seq", Buffer)                                            \
  X(Counts, "counts", Buffer)                                                  \
  X(TileState, "tile_state", Buffer)                                           \
  X(TileInfo, "tile_info", Buffer)                                             \
  X(TileOffsets, "tile_offsets", Buffer)                                       \
  X(TileEntries, "tile_entries", Buffer)                                       \
  X(TileOrder, "tile_order", Buffer)                                           \
  X(Envelopes, "envelopes", Buffer)                                            \
  X(WordPrefix, "word_prefix", Buffer)                                         \
  X(TileWindowInfo, "tile_window_info", Buffer)                                \
  X(TileWindows, "tile_windows", Buffer)                                       \
  X(PartialCounts, "partial_counts", Buffer)                                   \
  X(Error, "error", Buffer)
CMASK_ABI_SIGNATURE(tile_group, "tile_group", CMASK_ABI_TILE_GROUP)

/// How a metadata input is passed (the dialect's roles).
enum class MetadataRole { Scalar, PerSequence, Offsets };

/// The metadata arguments of the row group: a scalar is an i32, a
/// per-sequence value a buffer [B], offsets two buffers (all boundaries,
/// and per-sequence starts [B + 1]).
inline std::vector<NamedArg> metadataArgs(
    const std::vector<std::pair<std::string, MetadataRole>> &metadata) {
  std::vector<NamedArg> out;
  for (const auto &[name, role] : metadata) {
    std::string base = "metadata." + name;
    switch (role) {
    case MetadataRole::Scalar:
      out.push_back({base, ArgKind::I32});
      break;
    case MetadataRole::PerSequence:
      out.push_back({base, ArgKind::Buffer});
      break;
    case MetadataRole::Offsets:
      out.push_back({base, ArgKind::Buffer});
      out.push_back({base + ".starts", ArgKind::Buffer});
      break;
    }
  }
  return out;
}

/// The whole row group: head, metadata, tail.
inline std::vector<NamedArg>
rowGroupArgs(const std::vector<std::pair<std::string, MetadataRole>> &metadata,
             const std::string &prefix = "") {
  std::vector<NamedArg> out = toList(row_group_head::kSignature, prefix);
  for (NamedArg &arg : metadataArgs(metadata))
    out.push_back({prefix + arg.name, arg.kind});
  for (const NamedArg &arg : toList(row_group_tail::kSignature, prefix))
    out.push_back(arg);
  return out;
}

/// A phase of a preprocess kernel: its direction (0 rows, 1 columns) and
/// tile shape (an index into the direction's shapes; -1 for check and rows).
struct StageItem {
  Phase phase;
  int direction;
  int shape;
};

/// A stage: phases that do not depend on each other (docs/descriptor.md,
/// "Phases"). A preprocess kernel runs one or more stages in order.
using Stage = std::vector<StageItem>;

/// The phases of `stages`, in order: the order of a kernel's item counts.
inline std::vector<StageItem> stagePhases(const std::vector<Stage> &stages) {
  std::vector<StageItem> out;
  for (const Stage &stage : stages)
    out.insert(out.end(), stage.begin(), stage.end());
  return out;
}

/// The (direction, shape) argument groups of a kernel's phases, in order of
/// first use.
inline std::vector<std::pair<int, int>>
stageGroups(const std::vector<StageItem> &phases) {
  std::vector<std::pair<int, int>> groups;
  for (const StageItem &item : phases) {
    std::pair<int, int> group{item.direction, item.shape};
    bool seen = false;
    for (const auto &g : groups)
      seen |= g == group;
    if (!seen)
      groups.push_back(group);
  }
  return groups;
}

/// How one launch of a preprocess kernel runs its stages in order. Stage s
/// has stageBlocks(items of its phases, threads per block) blocks, and the
/// grid is their sum. Each block takes a ticket (an atomic add on sync[0])
/// and runs the stage its ticket falls in (the first stageBlocks(s = 0)
/// tickets the first stage, and so on), item `(ticket - the tickets of the
/// stages before) * threads + thread` of it. A block of stage s > 0 first
/// waits until sync[s], the count of finished blocks of stage s - 1,
/// reaches that stage's blocks; every block adds 1 to sync[1 + s] when its
/// items are done. Tickets, not block indices: a block only ever waits for
/// blocks that took a ticket before it, so already run, whatever order the
/// GPU starts blocks in (no co-residency needed, no deadlock). The kernel's
/// sync buffer, syncWords(stages) words, is zero before the launch.
inline int64_t stageBlocks(int64_t items, int64_t threads) {
  return items <= 0 ? 1 : (items + threads - 1) / threads;
}
inline int64_t syncWords(size_t numStages) {
  return 1 + static_cast<int64_t>(numStages);
}

/// The prefix of a group's argument names: `d0.` (row group of the rows),
/// `d1.s0.` (tile group of the columns' first shape).
inline std::string groupPrefix(int direction, int shape) {
  std::string p = "d" + std::to_string(direction) + ".";
  return shape < 0 ? p : p + "s" + std::to_string(shape) + ".";
}

/// The arguments of a preprocess kernel: the item count of each phase of
/// its stages (`items.s<stage>.<phase>.<group>`, in stage order: the names
/// hold the grouping into stages, so that the kernel ABI check refuses a
/// manifest whose stages differ from its kernel's), the group of each
/// (direction, shape) its phases use, in order of first use, then its
/// `sync` buffer.
inline std::vector<NamedArg> stageKernelArgs(
    const std::vector<Stage> &stages,
    const std::vector<std::pair<std::string, MetadataRole>> &metadata) {
  std::vector<NamedArg> out;
  for (size_t s = 0; s < stages.size(); ++s)
    for (const StageItem &item : stages[s]) {
      std::string group = groupPrefix(item.direction, item.shape);
      group.pop_back(); // the trailing '.'
      out.push_back({"items.s" + std::to_string(s) + "." +
                         stringify(item.phase) + "." + group,
                     ArgKind::Index});
    }
  for (auto [direction, shape] : stageGroups(stagePhases(stages))) {
    std::string prefix = groupPrefix(direction, shape);
    std::vector<NamedArg> group = shape < 0
                                      ? rowGroupArgs(metadata, prefix)
                                      : toList(tile_group::kSignature, prefix);
    out.insert(out.end(), group.begin(), group.end());
  }
  out.push_back({"sync", ArgKind::Buffer});
  return out;
}

/// What the first difference between an artifact's argument list for
/// `kernel` and this build's is, or "" when they are the same.
inline std::string describeMismatch(const std::string &kernel,
                                    const std::vector<NamedArg> &artifact,
                                    const std::vector<NamedArg> &expected) {
  auto show = [](const NamedArg &a) {
    return "'" + a.name + "' (" + stringify(a.kind) + ")";
  };
  for (size_t k = 0; k < artifact.size() || k < expected.size(); ++k) {
    std::string at = "kernel " + kernel + ": argument " + std::to_string(k);
    if (k >= artifact.size())
      return at + ": this runtime passes " + show(expected[k]) +
             ", which the artifact's kernel does not take";
    if (k >= expected.size())
      return at + ": the artifact's kernel takes " + show(artifact[k]) +
             ", which this runtime does not pass";
    if (!(artifact[k] == expected[k]))
      return at + " is " + show(artifact[k]) + " in the artifact and " +
             show(expected[k]) + " in this runtime";
  }
  return "";
}

#undef CMASK_ABI_ENUMERATOR
#undef CMASK_ABI_ENTRY
#undef CMASK_ABI_SIGNATURE

} // namespace cmask::abi

#endif // CMASK_RUNTIME_KERNELABI_H
