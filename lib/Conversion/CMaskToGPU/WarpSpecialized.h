//===- WarpSpecialized.h - The warp-specialized sm_90a CTA ------*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: what every warp-specialized
// attention kernel (the forward, the backward's key-tile and query-tile
// kernels) builds the same way, over HopperEmitter:
//   - the CTA: two consumer warpgroups (threads 0-255) and a producer
//     warpgroup (sm90::kProducerWarpgroup), split by splitRoles() with
//     their register budgets (setmaxnreg);
//   - the mbarriers, declared in one list (declareBarriers, declareRing)
//     and initialized in that order by thread 0 (initBarriers), which also
//     prefetches the tensor maps and then finds the aligned dynamic shared
//     memory (smem, pad);
//   - rings of shared-memory stages: a `full` mbarrier per stage (the
//     producer's expect-tx arrival, the copies' bytes) and an `empty` one
//     (an arrival from lane 0 of each consumer warp), used in running
//     positions t whose stage and phase slotOf() gives;
//   - a persistent kernel's work items (the forward's; a persistent
//     backward built on them measured no faster, docs/performance.md):
//     claimed by the producer's first warp from a counter pair (claimItem;
//     the launch's last CTA resets it, releaseCounters) and handed to the
//     consumers through a ring of shared-memory slots (publishItem,
//     receiveItem).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_WARPSPECIALIZED_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_WARPSPECIALIZED_H

#include "HopperEmitter.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::cmask {

/// A ring of `stages` shared-memory stages and their full/empty mbarriers.
struct Ring {
  Value full, empty;
  int64_t stages = 0;
};

/// Work items handed from the producer's first warp to the consumers: a
/// ring of `fields` i32 words per slot at the shared address `addr` (i32).
/// The warp's lane 0 arrives on `full` after its stores, lane 0 of each
/// consumer warp on `empty` after its reads.
struct ItemRing {
  Ring ring;
  Value addr;
  int64_t fields = 0;
};

/// Position t of a ring: its stage, and the parity a consumer waits for on
/// `full` (the phase of use t / stages); the producer waits on `empty` for
/// the opposite (a fresh barrier counts as freed).
struct RingSlot {
  Value stage, parity;
};

class WarpSpecializedKernel : public HopperEmitter {
protected:
  using HopperEmitter::HopperEmitter;

  /// Lane 0 of each consumer warp arrives on an `empty` barrier.
  static constexpr int64_t kConsumerWarps = sm90::kConsumerThreads / 32;

  /// A group of `n` mbarriers expecting `arrivals` each.
  Value declareBarriers(int64_t n, int64_t arrivals) {
    Value group = barrierGroup(n);
    inits.push_back({group, Value(), n, arrivals});
    return group;
  }
  /// A ring of `stages`: full (1 arrival: the producer's) and empty
  /// (`emptyArrivals`) barriers, initialized stage by stage.
  Ring declareRing(int64_t stages, int64_t emptyArrivals = kConsumerWarps) {
    Ring ring{barrierGroup(stages), barrierGroup(stages), stages};
    inits.push_back({ring.full, ring.empty, stages, emptyArrivals});
    return ring;
  }
  /// Thread `tid` 0 initializes the declared barriers (in declaration
  /// order) and prefetches `tensorMaps`; then the CTA's barrier; then sets
  /// smem and pad (HopperEmitter::alignedSharedMemory).
  void initBarriers(Value tid, ArrayRef<Value> tensorMaps) {
    ifThen(cmp(arith::CmpIPredicate::eq, tid, c32(0)), [&] {
      for (const Init &init : inits)
        for (int64_t s = 0; s < init.n; ++s) {
          Value count = cIdx(init.empty ? 1 : init.arrivals);
          nvgpu::MBarrierInitOp::create(b, loc, init.group, count, cIdx(s),
                                        Value());
          if (init.empty)
            nvgpu::MBarrierInitOp::create(
                b, loc, init.empty, cIdx(init.arrivals), cIdx(s), Value());
        }
      for (Value tm : tensorMaps)
        nvgpu::TmaPrefetchOp::create(b, loc, tm, Value());
    });
    gpu::BarrierOp::create(b, loc);
    std::tie(smem, pad) = alignedSharedMemory();
  }

  /// The slot of ring position `t` (i32).
  RingSlot slotOf(const Ring &ring, Value t) {
    return {remu(t, c32(ring.stages)), parityOf(t, ring.stages)};
  }
  /// The consumers' parity of use `n` of a ring of `size` slots.
  Value parityOf(Value n, int64_t size) {
    return cmp(arith::CmpIPredicate::eq, bitAnd(divu(n, c32(size)), c32(1)),
               c32(1));
  }
  /// The producer's parity for a consumer parity (the opposite).
  Value producerParity(Value consumerParity) {
    return arith::XOrIOp::create(b, loc, consumerParity, cBool(true));
  }

  /// Item `j` (the j-th handed over) as `values` (items.fields of them):
  /// the producer's whole warp waits for the slot, its lane `lane0` stores
  /// and arrives.
  void publishItem(const ItemRing &items, Value j, ArrayRef<Value> values,
                   Value lane0) {
    auto [slot, parity] = slotOf(items.ring, j);
    waitParity(items.ring.empty, toIndex(slot), producerParity(parity));
    // The waits and arrivals are opaque to LLVM: fences keep the stores
    // between them.
    compilerFence();
    ifThen(lane0, [&] {
      Value at = add(items.addr, mul(slot, c32(items.fields * 4)));
      for (auto [k, x] : llvm::enumerate(values))
        store(x, sharedAt(add(at, c32(4 * k))));
      compilerFence();
      expectTx(items.ring.full, toIndex(slot), 0); // arrive: releases them
    });
  }
  /// Item `j`'s words (warp-uniform), read by every consumer thread; lane
  /// 0 of each warp (`lane0`) gives the slot back.
  SmallVector<Value> receiveItem(const ItemRing &items, Value j, Value lane0) {
    auto [slot, parity] = slotOf(items.ring, j);
    waitParity(items.ring.full, toIndex(slot), parity);
    compilerFence();
    Value at = add(items.addr, mul(slot, c32(items.fields * 4)));
    SmallVector<Value> values;
    for (int64_t k = 0; k < items.fields; ++k)
      values.push_back(
          warpUniform(load(i32, sharedAt(add(at, c32(4 * k))), 4)));
    // Each warp's reads are done before its lane 0 arrives.
    compilerFence();
    NVVM::SyncWarpOp::create(b, loc, c32(-1));
    expectTx(items.ring.empty, toIndex(slot), 0, lane0);
    return values;
  }
  /// A claim on the launch's counter pair (`counters`: the next item past
  /// the grid, the CTAs done; zero before the launch): lane `lane0`'s
  /// relaxed atomic add, made warp-uniform (the other lanes' INT32_MAX
  /// loses warpUniform's min). The forward claims an item ahead, its
  /// latency under the current item's copies (claimed after them, 1.8-2.8%
  /// slower at 8 x 1K-2K); where items differ much in length (the
  /// backward's key tiles under GQA) a claim ahead holds the next item back
  /// behind a long one and lengthens the tail (docs/performance.md, the
  /// fifteenth session).
  Value claimItem(Value counters, Value lane0) {
    Value claim = ifElse(
        lane0, TypeRange{i32},
        [&] {
          return SmallVector<Value>{LLVM::AtomicRMWOp::create(
              b, loc, LLVM::AtomicBinOp::add, counters, c32(1),
              LLVM::AtomicOrdering::monotonic)};
        },
        [&] { return SmallVector<Value>{c32(INT32_MAX)}; })[0];
    return warpUniform(claim);
  }
  /// After the CTA's last claim: the launch's last CTA (of `gridX`) to get
  /// here resets the counters for the next launch. The count is an acq_rel
  /// atomic in inline PTX (NVPTX emits LLVM's acq_rel atomicrmw as a
  /// relaxed atom): the CTAs' claims happen before it, the reset after.
  void releaseCounters(Value counters, Value gridX, Value lane0) {
    ifThen(lane0, [&] {
      Value doneAt = gep(counters, c64(1), i32);
      Value done =
          LLVM::InlineAsmOp::create(
              b, loc, i32, ValueRange{doneAt},
              "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;", "=r,l,~{memory}",
              /*has_side_effects=*/true, /*is_align_stack=*/false,
              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
              .getResult(0);
      ifThen(eq(done, sub(gridX, c32(1))), [&] {
        store(c32(0), counters);
        store(c32(0), doneAt);
      });
    });
  }

  /// The roles: warpgroup `wg` sm90::kProducerWarpgroup gives registers back
  /// and runs `producer`, the consumer warpgroups run `consumer` (which
  /// begins with their increase, HopperEmitter::consumerRegisters, after
  /// whatever must run with the launch's registers). `beforeProducer` runs
  /// in the producer warpgroup with the launch's registers.
  void splitRoles(Value wg, function_ref<void()> producer,
                  function_ref<void()> consumer,
                  function_ref<void()> beforeProducer = nullptr) {
    auto ifOp = scf::IfOp::create(b, loc, eq(wg, c32(sm90::kProducerWarpgroup)),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    if (beforeProducer)
      beforeProducer();
    // Always: the consumers' setmaxnreg.inc waits for these registers.
    producerRegisters();
    producer();
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    consumer();
  }

  /// The dynamic shared memory and the offset of its aligned base (set by
  /// initBarriers).
  Value smem, pad;

private:
  struct Init {
    Value group, empty; ///< empty: a ring's (then group is its full)
    int64_t n, arrivals;
  };
  SmallVector<Init> inits;
};

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_WARPSPECIALIZED_H
