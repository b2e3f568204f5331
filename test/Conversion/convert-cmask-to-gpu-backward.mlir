// The attention backward part of convert-cmask-to-gpu (docs/attention.md):
// the structure of its four kernels in IR, beside the PTX checks of
// test/Target/PTX/attention-backward-ptxas.test.
// With the column direction (cmask-transpose-spec first):
// RUN: cmask-opt %masks/hstu.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x64 attention-head-dims=64" | FileCheck %s --check-prefixes=CHECK,COLS
// Without it (column mode rows: the row intervals):
// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x128,128x64 attention-head-dims=64" | FileCheck %s --check-prefixes=CHECK,ROWS
// The output parses and verifies again.
// RUN: cmask-opt %masks/hstu.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x64 attention-head-dims=64" | cmask-opt > /dev/null
// Not asked for: forward kernels only.
// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu="attention-head-dims=64 attention-backward=false" | FileCheck %s --check-prefix=OFF
// The column direction without its 128x64 tiles: a warning, forward only.
// RUN: cmask-opt %masks/hstu.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x128 attention-head-dims=64" 2>&1 | FileCheck %s --check-prefix=NOTILE

// The main kernels are listed on the spec beside the forward's.
// CHECK: cmask.spec @hstu attributes {
// CHECK-SAME: cmask.attention_backward = ["cmask_hstu_bwd_bf16_d64"]
// CHECK: gpu.module @cmask_attention {

// The pre-pass: D = rowsum(dO * O) per query row, 128 threads, pointers and
// scalars only (backward_pre in cmask_runtime/KernelABI.h).
// CHECK: gpu.func @cmask_hstu_bwd_bf16_d64_pre(%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: i64, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: i64) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>}
// CHECK: gpu.shuffle  xor

// The main kernel: six tensor maps by value (Q, dO, K, V, then LSE and D:
// 1 x 68 f32 boxes), three warpgroups. With the column direction it reads
// the column descriptor's lists; without, the row direction's tile_info.
// COLS: gpu.func @cmask_hstu_bwd_bf16_d64({{(%[^:]*: !llvm.ptr, ){19}()}}%{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: f32, %{{[^:]*}}: f32) kernel attributes {cmask.tensor_map_args = array<i32: 0, 1, 2, 3, 4, 5>, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32}
// ROWS: gpu.func @cmask_hstu_bwd_bf16_d64({{(%[^:]*: !llvm.ptr, ){14}()}}{{(%[^:]*: i32, ){5}()}}{{(%[^:]*: i64, ){5}()}}%{{[^:]*}}: f32, %{{[^:]*}}: f32) kernel attributes {cmask.tensor_map_args = array<i32: 0, 1, 2, 3, 4, 5>, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32}
// The grid's order (column lists): the last heads interleaved, as many as
// put the heaviest tile's entries on every SM (the SM count), within the
// L2 budget of the group's rows (64 MiB).
// COLS: nvvm.read.ptx.sreg.nsmid
// COLS: arith.constant 67108864 : i64
// Row intervals: first the CTA lists its query tiles, in query order
// (ballots over the row direction's tile_info).
// ROWS: nvvm.vote.sync  ballot
// The producer gives registers back and loads the key tile's K and V once,
// then per listed query tile Q and dO (64 rows) and LSE and D.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x64xbf16, 3>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x1x64xbf16, 3>
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<64x1x64xbf16, 3>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<1x68xf32, 3>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<1x68xf32, 3>
// The dQ warp (column lists): each step, once the consumers have staged
// dQ, its own proxy fence, one bulk reduction per consumer warp, and the
// staging handed back once the engine has read it.
// COLS: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// COLS-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// COLS: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// COLS: cp.async.bulk.wait_group.read 0;
// COLS: bar.arrive 5, 288;
// The consumers: S and dP with wgmma; partial tiles check the intervals a
// 32-key word at a time; dQ goes to the staging for the dQ warp (over the
// row intervals, whose list leaves no room for it: 16-byte atomics).
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvvm.wgmma.mma_async
// CHECK: bmsk.clamp.b32
// COLS-NOT: cp.reduce.async.bulk
// COLS: bar.arrive 4, 288;
// COLS-NOT: cp.reduce.async.bulk
// ROWS-NOT: bar.arrive
// ROWS: red.global.add.v4.f32
// ROWS-NOT: bar.arrive
// CHECK: gpu.return

// The dQ conversion (fp32 accumulator to the element type) and the
// deterministic dQ pass over the row direction's tiles (four tensor maps).
// CHECK: gpu.func @cmask_hstu_bwd_bf16_d64_dq(%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: f32) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>}
// CHECK: gpu.func @cmask_hstu_bwd_bf16_d64_dqr({{(%[^:]*: !llvm.ptr, ){16}()}}%{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: f32, %{{[^:]*}}: f32) kernel attributes {cmask.tensor_map_args = array<i32: 0, 1, 2, 3>, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: nvvm.wgmma.mma_async

// OFF: cmask.spec @hstu attributes {cmask.attention = [
// OFF-NOT: cmask.attention_backward
// OFF-NOT: _bwd_

// NOTILE: warning: convert-cmask-to-gpu: no backward kernels: the column tile shapes lack 128x64 (or attention-backward=false)
// NOTILE-NOT: _bwd_
