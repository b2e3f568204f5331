//===- BackwardQueryTile.cpp - The backward's deterministic dQ kernel -----===//
//
// The query-tile kernel (`<name>_dqr`, `deterministic=True`): the key-tile
// kernel's walk turned around (BackwardWalk.h). One CTA per (query tile of
// 128, query head) walks the row direction's 128x64 tile list: the fixed
// tile holds Q and dO (where the key-tile kernel keeps K and V), each
// step's ring stage K and V of 64 keys (where it keeps Q and dO);
// S = Q K^T, dP = dO V^T with the same wgmmas, P = 2^(S scale log2e +
// mlse_row), dS = P (dP - delta_row) (row values in registers), masked
// with the row intervals, and dQ += dS K with the key-tile kernel's dK
// wgmmas, dS from registers as the A operand; dQ * scale is written once,
// in a fixed order (bitwise the same run to run). Each warpgroup reads only
// its own dS: no dS in shared memory, no barrier between the warpgroups,
// no dV, dK nor atomics.
//
//===----------------------------------------------------------------------===//

#include "BackwardKernels.h"
#include "BackwardWalk.h"

using namespace mlir;
using namespace mlir::cmask;
namespace bwd_dqr = ::cmask::abi::backward_dq_rows;

namespace {

class QueryTileKernel : public BackwardWalk {
public:
  using BackwardWalk::BackwardWalk;
  void build(gpu::GPUFuncOp func);

private:
  void setSteps(Value seq, Value local) override { steps = numEntries; }
  /// The key/value head of the CTA's query head (one round: steps =
  /// numEntries).
  Value ringHead(Value round) override { return divu(fixHead, kvGroup); }
  int64_t fixedSlots() const override { return v.rowSlots; }
  void consumerSetup() override;
  QueryValues queryValues(Value ldStage, Value col) override {
    return {{rowMlse[0], rowMlse[1]}, {rowDelta[0], rowDelta[1]}};
  }
  /// The queries are the fragment's rows.
  int64_t queryOf(int64_t i) const override { return (i >> 1) & 1; }
  // withDs: the walk's, dQ_w += dS_w K(t) (the key-tile kernel's dK +=
  // dS^T Q with the step's K in Q's place, carried as dK).
  void storeGradients(Value dV, Value dK) override {
    // dQ * scale of the warpgroup's 64 queries (carried as dK).
    storeFixedRows(dK, gdQ, dqToken, dqHead, scale);
  }

  Value gdQ, dqToken, dqHead, scale;
  /// -LSE log2(e) and delta of the thread's two query rows, and the arrays
  /// they come from ([heads, ldStride]).
  Value rowMlse[2], rowDelta[2], gMlse, gDelta, ldStride;
};

} // namespace

void QueryTileKernel::build(gpu::GPUFuncOp func) {
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  auto arg = [&](int i) { return body.getArgument(i); };
  // (tmQ, tmK, tmV, tmdO: boxes of 128, 64, 64, 128 rows; dQ, mlse, delta,
  //  cu_seqlens_q, cu_seqlens_k, row intervals, q_tile_seq, q_tile_base,
  //  counts, tile_offsets, tile_entries, tile_order of the row direction's
  //  128x64 tiles; heads i32, kv_group i32, ld_stride i64, dq_token i64,
  //  dq_head i64, scale_log2 f32, scale f32)
  tmFixA = tensorMapArg(arg(bwd_dqr::TmQ), boxShape(kFixedRows), elt, true);
  tmRingA =
      tensorMapArg(arg(bwd_dqr::TmK), boxShape(sm90::kBoxRows), elt, true);
  tmRingB =
      tensorMapArg(arg(bwd_dqr::TmV), boxShape(sm90::kBoxRows), elt, true);
  tmFixB = tensorMapArg(arg(bwd_dqr::TmDO), boxShape(kFixedRows), elt, true);
  gdQ = global(arg(bwd_dqr::DQ));
  gMlse = global(arg(bwd_dqr::Mlse));
  gDelta = global(arg(bwd_dqr::Delta));
  auto [cuQ, cuK] = walkArgs(body, bwd_dqr::CuSeqlensQ);
  numHeads = arg(bwd_dqr::NumHeads);
  kvGroup = arg(bwd_dqr::KvGroup);
  ldStride = arg(bwd_dqr::LdStride);
  dqToken = arg(bwd_dqr::DQTokenStride);
  dqHead = arg(bwd_dqr::DQHeadStride);
  scaleLog2 = arg(bwd_dqr::ScaleLog2);
  scale = arg(bwd_dqr::Scale);
  buildWalk(cuQ, cuK, numHeads);
}

void QueryTileKernel::consumerSetup() {
  // Each warpgroup reads only its own dS, from registers: no dS in shared
  // memory (dsSync unset).
  Value ivRow[2], fixValid[2], clamped[2];
  fixedRows(ivRow, fixValid, clamped);
  // mlse and delta are _pre's: a no-op in the plain launch the runtime
  // makes, and the right order if this kernel is ever a dependent of it.
  gridDependencyWait();
  for (int h = 0; h < 2; ++h) {
    Value at =
        add(mul(zext64(fixHead), ldStride), sext64(add(fixStart, clamped[h])));
    rowMlse[h] = load(f32, gep(gMlse, at, f32), 4);
    rowDelta[h] = load(f32, gep(gDelta, at, f32), 4);
  }
}

void mlir::cmask::buildBackwardQueryTile(OpBuilder &b, Location loc,
                                         const BackwardVariant &variant,
                                         gpu::GPUFuncOp func) {
  QueryTileKernel(b, loc, variant).build(func);
}
