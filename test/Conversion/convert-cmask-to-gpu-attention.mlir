// The attention forward part of convert-cmask-to-gpu (docs/attention.md).
// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x128,128x64,64x64 attention-head-dims=128,64" | FileCheck %s
// The output parses and verifies again.
// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=tile-shapes=128x64 | cmask-opt | FileCheck %s --check-prefix=ONE
// RUN: not cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=tile-shapes=64x64 2>&1 | FileCheck %s --check-prefix=NOTILE
// RUN: not cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=attention-head-dims=96 2>&1 | FileCheck %s --check-prefix=DIM
// RUN: not cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=attention-dtypes=f32 2>&1 | FileCheck %s --check-prefix=DTYPE

// One kernel per head dimension and attention tile shape (64x64 is a
// preprocess-only shape), listed on the spec.
// CHECK: cmask.spec @hstu attributes {cmask.attention = ["cmask_hstu_fwd_bf16_d128_128x128", "cmask_hstu_fwd_bf16_d128_128x128_persistent", "cmask_hstu_fwd_bf16_d128_128x64", "cmask_hstu_fwd_bf16_d64_128x128", "cmask_hstu_fwd_bf16_d64_128x128_persistent", "cmask_hstu_fwd_bf16_d64_128x64"]
// CHECK: gpu.module @cmask_attention {
// The tail of its arguments (KernelABI.h): scheduler, num_heads, kv_group,
// q_pack_shift, section_heads, the strides, total_q, scale_log2.
// CHECK: gpu.func @cmask_hstu_fwd_bf16_d128_128x128(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, {{.*}}, %{{.*}}: !llvm.ptr, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32) kernel attributes {cmask.tensor_map_args = array<i32: 0, 1, 2>, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32}

// The producer warpgroup gives registers back and streams Q, then K and V
// of the listed tiles (128x128: K boxes of 128 rows) through the ring. The
// Q boxes' type says 64 rows of one head; packed (q_pack_shift), the
// runtime's tensor map holds 64 >> shift positions of 2^shift heads.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x64xbf16, 3>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>

// The consumers: the first step (prologue). The first slot of both rows is
// loaded only when the tile needs masking (partial, or crossing k_len).
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: %{{.*}}:2 = scf.if %[[NEED:.*]] -> (i64, i64) {
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// S = QK^T: 8 wgmma steps over D = 128, issued before the mask words.
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// Mask words (TK/32 = 4 per row half, two row halves), in partial tiles only:
// the full-tile branch yields zeros and does nothing else.
// CHECK: %{{.*}}:8 = scf.if %[[NEED]] -> (i32, i32, i32, i32, i32, i32, i32, i32) {
// CHECK: nvvm.inline_ptx "bmsk.clamp.b32 $0, $1, $2;"
// CHECK: } else {
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: scf.yield %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]] : i32
// CHECK-NEXT: }
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// Selects on the accumulator layout, partial tiles only: the full-tile
// branch yields the accumulator fragments unchanged (no loads, no compares).
// CHECK: %{{.*}}:64 = scf.if %[[NEED]] -> (f32,
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{[^,]*}}, %{{[^,]*}}, {{.*}} : f32,
// CHECK-NEXT: }
// P(0) into the 32 registers of the PV wgmma's A operand.
// CHECK-COUNT-32: llvm.inline_asm has_side_effects "cvt.rn.bf16x2.f32 $0, $2, $1;"
// The steady state: S(t) and PV(t-1) in flight together, PV with n = D and
// P from registers (inline PTX).
// CHECK: scf.for
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $133, 0;\0Awgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, {{.*}}, $63}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;\0A}"
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// The running row maximum moves only past 2^8 in the exponentials.
// CHECK: %[[GROW:.*]] = arith.subf %[[MAX:.*]], %[[OLD:.*]] : f32
// CHECK-NEXT: %[[GROW2:.*]] = arith.mulf %[[GROW]], %{{.*}} : f32
// CHECK-NEXT: %[[THR:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT: %[[MOVES:.*]] = arith.cmpf ogt, %[[GROW2]], %[[THR]] : f32
// CHECK-NEXT: %[[NEW:.*]] = arith.select %[[MOVES]], %[[MAX]], %[[OLD]] : f32
// The correction is exactly 1 where the maximum stayed.
// CHECK: %[[SAME:.*]] = arith.cmpf oeq, %[[NEW]], %[[OLD]] : f32
// CHECK: %[[UNIT:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[CORR:.*]] = arith.select %[[SAME]], %[[UNIT]], %{{.*}} : f32
// K(t)'s release waits for a test on the row maxima (which keeps ptxas's
// PV wait below the softmax's row max).
// CHECK: %[[CORR_OK:.*]] = arith.cmpf uge, %[[CORR]]
// CHECK: %[[REL:.*]] = arith.andi %{{.*}}, %[[CORR_OK]] : i1
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%{{.*}}], %{{.*}}, predicate = %[[REL]]
// P(t) is packed after PV(t-1) is done with P(t-1); then O is rescaled,
// only where a correction of the warp is not exactly 1 (a warp vote).
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-32: llvm.inline_asm has_side_effects "cvt.rn.bf16x2.f32 $0, $2, $1;"
// CHECK: %[[NOT1:.*]] = arith.cmpf une, %[[CORR]], %{{.*}} : f32
// CHECK: %[[MOVED:.*]] = arith.ori %[[NOT1]], %{{.*}} : i1
// CHECK: %[[ANY:.*]] = nvvm.vote.sync any %{{.*}}, %[[MOVED]] -> i1
// CHECK: scf.if %[[ANY]] -> (!llvm.struct<(f32,
// CHECK-COUNT-64: arith.mulf
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{.*}} : !llvm.struct<(f32,
// The last PV.
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// Output: O and the log-sum-exp (lg2), then the debug counters (stats).
// CHECK: lg2.approx.f32
// CHECK: llvm.atomicrmw add

// The 128x64 variant: K boxes of 64 rows, S with n = 64.
// CHECK: gpu.func @cmask_hstu_fwd_bf16_d128_128x64(
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// D = 64: PV with n = 64.
// CHECK: gpu.func @cmask_hstu_fwd_bf16_d64_128x128(
// CHECK: llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, {{.*}}, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK: gpu.func @cmask_hstu_fwd_bf16_d64_128x64(

// The persistent kernel (128x128 only): the producer warp claims items from
// the scheduler counter, hands each to the consumers through shared memory
// and waits for Q's release (emptyQ) before the next item's Q; the consumers
// loop over the items; the last CTA resets the counters (acq_rel).
// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x128 attention-head-dims=128" | FileCheck %s --check-prefix=PERS
// PERS: gpu.func @cmask_hstu_fwd_bf16_d128_128x128(
// PERS: gpu.func @cmask_hstu_fwd_bf16_d128_128x128_persistent(
// PERS: nvvm.setmaxregister  decrease 24
// PERS: scf.while
// PERS: llvm.atomicrmw add {{.*}} monotonic : !llvm.ptr<1>, i32
// PERS: nvvm.inline_ptx "redux.sync.min.u32 $0, $1, 0xffffffff;"
// PERS: llvm.store {{.*}} : i32, !llvm.ptr<3>
// PERS: nvgpu.mbarrier.try_wait.parity
// PERS: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>
// PERS: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x64xbf16, 3>
// PERS: llvm.inline_asm has_side_effects "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;"
// PERS: nvvm.setmaxregister  increase 240
// PERS: scf.while
// PERS: llvm.load {{.*}} : !llvm.ptr<3> -> i32
// PERS: nvvm.wgmma.mma_async
// PERS: gpu.return

// ONE: gpu.func @cmask_hstu_fwd_bf16_d128_128x64(
// NOTILE: error: convert-cmask-to-gpu: the attention kernels need a tile shape of 128 query rows and 64 or 128 keys (or attention-head-dims="")
// DIM: error: attention forward: unsupported head dimension 96 (supported: 64, 128)
// DTYPE: error: convert-cmask-to-gpu: attention-dtypes: 'f32' is not bf16 or f16
