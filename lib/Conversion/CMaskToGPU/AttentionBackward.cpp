//===- AttentionBackward.cpp - Descriptor-driven attention backward -------===//
//
// The sm_90a backward (Attention.h: buildAttentionBackward): four kernels,
// one builder each (BackwardKernels.h), launched in this order by the
// runtime:
//
//   <name>_pre  delta = rowsum(dO * O), mlse = -LSE log2(e) per (query row,
//               head) (BackwardRowwise.cpp).
//   <name>      the key-tile kernel: one CTA per (key tile of 128 keys,
//               key/value head) walks its non-empty query tiles (64
//               queries) for every query head of its group: dV, dK and
//               the dQ accumulator (BackwardKeyTile.cpp; specs without a
//               column direction: BackwardKeyTileRows.cpp).
//   <name>_dq   dQ = scale * dQacc in the element type (BackwardRowwise.cpp).
//   <name>_dqr  the query-tile kernel (`deterministic=True`): dQ over the
//               row direction's lists, in a fixed order, instead of the
//               accumulator and <name>_dq (BackwardQueryTile.cpp).
//
// The tile kernels share one walk (BackwardWalk.h: the fixed tile, the
// ring, a step's scores, P^T and dS^T) over the warp-specialized CTA
// (WarpSpecialized.h), from the same building blocks as the forward
// (HopperEmitter.h). The step is software-pipelined
// (docs/attention.md#backward): S^T of the next tile is issued before the
// loop turns, dP^T at the step's start with P^T computed under it and dV
// from P^T in registers under the dS^T that follows, dQ is
// its own wgmma group, added to the accumulator by the bulk-copy engine
// from a shared-memory staging (vector atomics over the row intervals).
//
// The dQ accumulator (fp32, zeroed by the runtime) is blocked so that each
// thread's four fragment values of a column pair are 16 contiguous bytes:
// query rows are padded per sequence, row r of sequence s at
//   R = base(s) + r,  base(s) = 16 ceil(cu_q[s] / 16) + 16 s
// (a multiple of 16 past the previous sequence), and (R, head, column c)
// lives at float index
//   ((R / 16) heads + head) 16 D + (c / 8) 128 + (R % 8) 16
//   + ((c / 2) % 4) 4 + ((R / 8) % 2) 2 + c % 2:
// a warp's float4s of 8 fragment columns are 512 contiguous bytes in lane
// order (lane 4 (R % 8) + (c / 2) % 4), so that a warp's 16-byte stores of
// them to shared memory, in the same order, touch every bank once per
// quarter.
// A query tile's rows past q_len (their dS is 0) may add zeros past the
// sequence's rows; the runtime leaves 64 rows of slack at the end.
//
// Validated against float64 autograd on the H200 (test/gpu/test_backward.py).
// ptxas: no spills (D = 64 and 128).
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Attention.h"

#include "BackwardKernels.h"
#include "BackwardWalk.h"
#include "KernelSignature.h"

using namespace mlir;
using namespace mlir::cmask;
// The kernels' arguments (cmask_runtime/KernelABI.h).
namespace bwd = ::cmask::abi::backward;
namespace bwd_rows = ::cmask::abi::backward_rows;
namespace bwd_pre = ::cmask::abi::backward_pre;
namespace bwd_dq = ::cmask::abi::backward_dq;
namespace bwd_dqr = ::cmask::abi::backward_dq_rows;

std::string BackwardVariant::kernelName(llvm::StringRef prefix) const {
  return (prefix + "_bwd_" + stringifyElementType(dtype) + "_d" +
          llvm::Twine(headDim))
      .str();
}

int64_t BackwardVariant::sharedBytes() const {
  return BackwardLayout(*this).total;
}

int64_t BackwardVariant::rowListCapacity() const {
  return rowTileK ? kRowListCapacity : 0;
}

std::optional<std::string>
mlir::cmask::checkBackwardVariant(const BackwardVariant &v) {
  if (v.headDim != 64 && v.headDim != 128)
    return "head dimension " + std::to_string(v.headDim) +
           " (supported: 64, 128)";
  if (v.numSlots < 1 || v.numSlots > kMaxDescriptorSlots)
    return "column slot count " + std::to_string(v.numSlots);
  if (v.rowTileK != 0 && v.rowTileK != 64 && v.rowTileK != 128)
    return "row tile shape 128x" + std::to_string(v.rowTileK) +
           " (supported: 128x64, 128x128)";
  if (v.sharedBytes() > AttentionVariant::kMaxSharedBytes)
    return "shared memory";
  return std::nullopt;
}

void mlir::cmask::buildAttentionBackward(gpu::GPUModuleOp gpuModule,
                                         llvm::StringRef name,
                                         const BackwardVariant &variant,
                                         Location loc) {
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto kernel = [&](llvm::StringRef suffix,
                    const ::cmask::abi::Signature &signature, int32_t threads,
                    std::optional<int32_t> minBlocks = std::nullopt) {
    b.setInsertionPointToEnd(gpuModule.getBody());
    return createKernel(b, loc, (name + suffix).str(), signature, threads,
                        minBlocks);
  };
  buildBackwardPre(b, loc, variant,
                   kernel("_pre", bwd_pre::kSignature, bwd_pre::kThreads));
  buildBackwardKeyTile(
      b, loc, variant,
      kernel("", variant.rowTileK ? bwd_rows::kSignature : bwd::kSignature,
             AttentionVariant::kThreads, /*minBlocks=*/1));
  buildBackwardConvert(b, loc, variant,
                       kernel("_dq", bwd_dq::kSignature, bwd_dq::kThreads));
  buildBackwardQueryTile(b, loc, variant,
                         kernel("_dqr", bwd_dqr::kSignature,
                                AttentionVariant::kThreads, /*minBlocks=*/1));
}
