//===- BackwardKeyTile.h - The backward's key-tile kernels ------*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU. The key-tile kernel (the
// backward's main kernel): one CTA per (key tile of 128 keys, key/value
// head), walking the query tiles (64 queries) of every query head of its
// group (BackwardWalk.h); dV and dK in registers, dQ added to the blocked
// fp32 accumulator (AttentionBackward.cpp) by bulk reductions from a
// shared-memory staging (its row-interval form: vector atomics). Its
// row-interval form (KeyTileRowsKernel, for specs without a column
// direction) lists the query tiles from the row direction and masks with
// the row intervals.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKEYTILE_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKEYTILE_H

#include "BackwardWalk.h"

namespace mlir::cmask {

class KeyTileKernel : public BackwardWalk {
public:
  using BackwardWalk::BackwardWalk;
  /// The kernel over the column direction's lists (abi::backward).
  virtual void build(gpu::GPUFuncOp func);

protected:
  /// The arguments both forms begin with (the ABI's backward head): the
  /// tensor maps and the gradients' buffers.
  void headArgs(Block &body);

  void setSteps(Value seq, Value local) override {
    steps = mul(numEntries, kvGroup);
  }
  /// The group's query heads outermost (a round of the list each), the tile
  /// list inside.
  Value ringHead(Value round) override {
    return add(mul(fixHead, kvGroup), round);
  }
  int64_t fixedSlots() const override { return v.numSlots; }
  /// The query tile's mlse and delta rows.
  int64_t stageExtraBytes() const override { return 2 * kLdBox * 4; }
  void loadStageExtras(Value stage, Value stageIdx, Value qRow,
                       Value head) override;
  void consumerSetup() override;
  QueryValues queryValues(Value ldStage, Value col) override;
  /// The queries are the fragment's columns.
  int64_t queryOf(int64_t i) const override { return i & 1; }
  /// dV += P^T dO, P^T from registers (its own commit group).
  int64_t withP(const StepOperands &g, ArrayRef<Value> p, Value &dV) override;
  // withDs: the walk's, dK += dS^T Q from registers, issued after dQ
  // (dV += P^T dO already in flight, withP), running under dQ's staging.
  /// dQ = dS K from both warpgroups' dS^T (in flight).
  Value gradients(const StepOperands &g) override;
  /// dQ added to the accumulator: staged for the dQ warp, or
  /// red.global.add.v4.f32.
  void addGradients(const StepOperands &g, Value dq) override;
  /// The dQ warp: each step's staging to the bulk-copy engine.
  void producerWarps() override;
  void storeGradients(Value dV, Value dK) override;

  /// dQ goes through shared memory and the bulk-copy engine (the layout
  /// has room; else vector atomics).
  bool dqStaged() const { return lay.dqBytes != 0; }

  Value gdQ, gdK, gdV, dkToken, dkHead, dvToken, dvHead, totalQ, scale;
  /// The accumulator units' words (abi::backward::kUnitBytes; column form).
  Value gUnits;
  /// The dQ warp's operations of one step: lane `lane` (< 8) hands warp
  /// `lane`'s staging at `from` to the bulk-copy engine for the accumulator
  /// address in its target slot (none where 0), stored or added as
  /// `claim`, the count's old value of its unit, says (claimUnits; -1:
  /// none).
  void dqWarpStep(Value lane, Value from, Value target, Value claim);
  /// Lanes 0-7 count the units of the step at `at` (where `when` holds) in
  /// their words and return the old values, -1 where none: the dQ warp
  /// claims a step's units during the step before, off its path.
  Value claimUnits(Value lane, ListPlace at, Value when);
  /// The warp's dQ staging, the thread's 16 bytes in it and the warp's
  /// target slot (shared addresses).
  Value dqWarp, dqLane, dqTarget;
};

/// The key-tile kernel without a column direction (abi::backward_rows): one
/// CTA per (key/value head, sequence, key tile); the producer's first warp
/// lists the query tiles from the row direction's 128 x rowTileK tile
/// entries in shared memory (buildRowList), and partial tiles are masked
/// with the row intervals, transposed through shared memory (maskWord).
class KeyTileRowsKernel : public KeyTileKernel {
public:
  using KeyTileKernel::KeyTileKernel;
  void build(gpu::GPUFuncOp func) override;

protected:
  /// CTA (head, sequence, key tile), heads outermost.
  void forEachCta(Value ctaHeads,
                  function_ref<void(Value, Value, Value)> run) override;
  /// The list is made in the kernel (setSteps, beforeProducerRegisters).
  void loadList(Value tile) override {}
  void setSteps(Value seq, Value local) override;
  /// The producer's first warp lists the tiles, with the launch's
  /// registers (in the prologue shared by all warpgroups the list made
  /// ptxas spill in the consumers' loop).
  void beforeProducerRegisters() override {
    buildRowList();
    rowListSteps();
  }
  /// The list first (setmaxnreg.inc waits for the producer's decrease,
  /// which follows the list).
  void beforeConsumerRegisters() override { rowListSteps(); }
  Value entryWord(Value e) override {
    return load(i32, sharedAt(add(listAddr, mul(e, c32(4)))), 4);
  }
  Value maskWord(Value word) override;

  /// The producer warpgroup's first warp lists the key tile's non-empty
  /// query tiles (of 64) in shared memory, from the row direction's tile
  /// entries of the query tiles of 128.
  void buildRowList();
  /// Waits for the list (sm90::kBarrierRowList, all threads) and sets
  /// numEntries and steps from it.
  void rowListSteps();

  /// The row direction's q_tile_base and tile_info, the batch's sequences,
  /// key tiles per sequence (the grid's bound), the tile_info row stride;
  /// the CTA's sequence, key tile and list address.
  Value gRowBase, gRowInfo, numSeqs, keyTiles, infoStride, ctaSeq, ctaTile,
      listAddr;
  /// The step's 64 x 4 visibility words (maskWord).
  Value maskAddr;
};

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_BACKWARDKEYTILE_H
