//===- AttentionForward.cpp - Descriptor-driven attention forward ---------===//
//
// One parameterized builder (Attention.h) for the sm_90a forward kernel:
// element type, head dimension D (64 or 128), key tile TK (64 or 128) and
// slot count K are the parameters; everything below is derived from them.
//
// The builder (ForwardBuilder.h) spans three files: this one (the overview,
// the variants, the arguments and the roles), ForwardProducer.cpp and
// ForwardConsumer.cpp.
//
// Shared memory (bytes from a 1024-aligned base, 128B-swizzled boxes of 64
// columns, docs/attention.md):
//   Q      [slot][wg 2][D/64] boxes of 64 x 64        slots * 2 * 64 * D * 2
//          (slots: 1; the persistent kernel's 2)
//   K ring [stage][D/64] boxes of TK x 64             kStages * TK * D * 2
//   V ring [stage][TK/64][D/64] boxes of 64 x 64      vStages * TK * D * 2
// The mbarriers are static shared memory, which `gpu.dynamic_shared_memory`
// aliases: the dynamic buffer is used from its first 1024-aligned address
// past 1 KB (2 KB are reserved for that).
//
// A step of the consumers over key tile t: wait for K(t) and V(t-1); issue
// S(t) = QK^T (wgmma, asynchronous); issue O += P(t-1)V(t-1) (P from
// registers, the A operand); build the visibility words of partial tiles;
// wait for S(t); mask it (partial tiles only); online softmax; release
// K(t); wait for PV(t-1); pack P(t) into the registers PV(t-1) has freed;
// rescale O to step t's row maxima. ptxas keeps the PV wait below the K
// release, whose predicate depends on the row maxima, so the exponentials
// run under the warpgroup's own PV; with the release right after the S
// wait, ptxas hoisted the PV wait above the softmax. FlashAttention-4's
// and cuDNN flex's SASS wait for PV right after the row maxima; that
// order measured 0.95-1.01x here (docs/performance.md).
// Column windows (the grid kernel at 128x128, docs/attention.md): a
// warpgroup runs a partial tile whose descriptor window (tile_windows) fits
// 80 keys on those keys only (S as m64n80k16, P in 20 registers, the PV in
// 5 k-steps): four step bodies (this tile and the previous one each whole
// or windowed), each waiting for its own wgmmas. Only for query tiles with
// at least a quarter of their tiles partial (partial_counts): the dispatch
// slowed the steps of full tiles by 2-4%.
// The two consumer warpgroups issue their wgmmas independently: making them
// take turns (FlashAttention-3's ping-pong, which FlashAttention-4 keeps)
// measured 2-3% slower on long sequences (docs/performance.md).
//
// GQA packing (the q_pack_shift argument, docs/attention.md): a work item's
// 128 rows are then the 2^shift query heads of one KV head at 128 >> shift
// positions of its query tile (packedItem, rowPos/rowHead); the steps are
// the same, each row's output bitwise the unpacked one's.
//
// Two schedules (AttentionVariant::persistent). The grid: one CTA per work
// item (head, query tile; packed: KV head and part of a query tile), decoded
// from the CTA's index before the roles split. Persistent: one CTA per SM; the
// producer warp claims items from a counter pair (the Scheduler argument; the
// last CTA resets it), decodes each and hands it to the consumers through two
// shared-memory slots (fullItem/emptyItem); the barrier phases run on across
// items (ring position tBase + entry), Q has two buffers (each released after
// the last S of its item) so that an item's Q loads a whole item ahead, at the
// cost of a K stage (the V ring keeps 3 at D=128); the items come in sections
// of heads whose K/V L2 can serve, each K/V stream with several readers at
// once (the section_heads argument). Launched one
// CTA per item the persistent kernel measured 2-5% slower than the grid
// kernel (about half of it the item loop around the steps); one CTA per
// SM, it gained 12-20% on batches and single sequences of up to 8K keys
// and lost 1-4% at 16K-32K (docs/performance.md), so the runtime chooses
// per call (docs/attention.md).
//
//===----------------------------------------------------------------------===//

#include "ForwardBuilder.h"
#include "KernelSignature.h"
#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cmask;
using namespace mlir::cmask::forward;
/// The kernel's arguments (cmask_runtime/KernelABI.h).
namespace abi = ::cmask::abi::forward;

std::string AttentionVariant::kernelName(llvm::StringRef prefix) const {
  return (prefix + "_fwd_" + stringifyElementType(dtype) + "_d" +
          llvm::Twine(headDim) + "_" + tile.str() +
          (persistent ? "_persistent" : ""))
      .str();
}

int64_t AttentionVariant::kStages() const {
  return SharedLayout(*this).kStages;
}
int64_t AttentionVariant::vStages() const {
  return SharedLayout(*this).vStages;
}
int64_t AttentionVariant::sharedBytes() const {
  return SharedLayout(*this).total;
}

std::optional<std::string>
mlir::cmask::checkAttentionVariant(const AttentionVariant &v) {
  if (v.headDim != 64 && v.headDim != 128)
    return "head dimension " + std::to_string(v.headDim) +
           " (supported: 64, 128)";
  if (v.tile.q != 128 || (v.tile.k != 64 && v.tile.k != 128))
    return "tile shape " + v.tile.str() + " (supported: 128x64, 128x128)";
  if (v.numSlots < 1 || v.numSlots > kMaxDescriptorSlots)
    return "slot count " + std::to_string(v.numSlots);
  if (v.kStages() < 2)
    return "shared memory: fewer than two K/V stages fit";
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The kernel.
//===----------------------------------------------------------------------===//

void ForwardBuilder::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto arg = [&](int i) { return entry.getArgument(i); };
  tmQ = tensorMapArg(arg(abi::TmQ), boxShape(sm90::kBoxRows), elt,
                     /*swizzle=*/true);
  tmK = tensorMapArg(arg(abi::TmK), boxShape(v.tile.k), elt, /*swizzle=*/true);
  tmV = tensorMapArg(arg(abi::TmV), boxShape(sm90::kBoxRows), elt,
                     /*swizzle=*/true);
  gO = global(arg(abi::Out));
  gLSE = global(arg(abi::Lse));
  cuQ = global(arg(abi::CuSeqlensQ));
  cuK = global(arg(abi::CuSeqlensK));
  gIv = global(arg(abi::Intervals));
  qTileSeq = global(arg(abi::QTileSeq));
  qTileBase = global(arg(abi::QTileBase));
  Value counts = global(arg(abi::Counts));
  offsets = global(arg(abi::TileOffsets));
  gEntries = global(arg(abi::TileEntries));
  gWindows = global(arg(abi::TileWindows));
  gPartials = global(arg(abi::PartialCounts));
  order = global(arg(abi::TileOrder));
  gStats = global(arg(abi::Stats));
  gSched = global(arg(abi::Scheduler));
  numHeads = arg(abi::NumHeads);
  kvGroup = arg(abi::KvGroup);
  qPackShift = arg(abi::QPackShift);
  packMask = sub(shl(c32(1), qPackShift), c32(1));
  sectionHeads = arg(abi::SectionHeads);
  oTokenStride = arg(abi::OTokenStride);
  oHeadStride = arg(abi::OHeadStride);
  totalQ = arg(abi::TotalQ);
  scaleLog2 = arg(abi::ScaleLog2);

  tid = fromIndex(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), i32);
  bidX = fromIndex(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), i32);
  gridX = fromIndex(gpu::GridDimOp::create(b, loc, gpu::Dimension::x), i32);
  // The work items: (head, query tile), heads outermost: the CTAs that run
  // together are mostly of one head and read the same K/V prefix, which L2
  // then serves once (on the H200 at 32K, DRAM traffic halves against heads
  // innermost; docs/performance.md). In a head, the query tiles come
  // heaviest first.
  numQTiles = warpUniform(loadI32(counts, c32(0)));
  gCounts = counts;
  warpIdx = shr(tid, c32(5));
  wg = shr(warpIdx, c32(sm90::kWarpgroupShift - 5));

  auto body = [&] {
    barQ = declareBarriers(lay.qSlots, 1);
    kRing = declareRing(lay.kStages);
    vRing = declareRing(lay.vStages);
    if (v.persistent) {
      emptyQ = declareBarriers(lay.qSlots, kConsumerWarps);
      items.ring = declareRing(kItemSlots);
      items.fields = kItemFields;
    }
    initBarriers(tid, {tmQ, tmK, tmV});
    items.addr = trunc32(fromIndex(
        add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem),
            add(pad, cIdx(lay.items))),
        i64));

    splitRoles(wg, [&] { producer(); }, [&] { consumer(); });
  };
  if (v.persistent) {
    // Each CTA takes items until none is left: the first its own index,
    // the next ones from the launch's counter (producer()).
    body();
  } else {
    // One CTA per item: the grid covers the batch's bound on query tiles
    // (abi::batchQTiles) x heads; the batch may have fewer query tiles.
    Value perHead = divu(gridX, numHeads);
    Value slot = remu(bidX, perHead); // position in the heavy-first order
    ifThen(cmp(arith::CmpIPredicate::slt, slot, numQTiles), [&] {
      decodeItem(add(mul(divu(bidX, perHead), numQTiles), slot));
      body();
    });
  }
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUFuncOp mlir::cmask::buildAttentionForward(
    gpu::GPUModuleOp gpuModule, llvm::StringRef name,
    const AttentionVariant &variant, Location loc) {
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto func = createKernel(b, loc, name, abi::kSignature,
                           AttentionVariant::kThreads, /*minBlocks=*/1);
  ForwardBuilder(b, loc, variant).build(func);
  return func;
}
