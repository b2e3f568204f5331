// RUN: cmask-opt %masks/causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x64 attention-head-dims=" | FileCheck %s
// The output is valid IR (it parses and verifies again).
// RUN: cmask-opt %masks/causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu | cmask-opt | FileCheck %s --check-prefix=TWO
// RUN: cmask-opt %masks/causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x128,128x64,4x4,8x3 attention-head-dims=" | FileCheck %s --check-prefix=SPLIT
// RUN: cmask-opt %s --convert-cmask-to-gpu --verify-diagnostics
// RUN: not cmask-opt %masks/causal.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=tile-shapes=128 2>&1 | FileCheck %s --check-prefix=SHAPES

// The launch plan: one kernel running seven stages; stage 0 fuses both
// directions' checks, row phases and seqs/envinit phases.
// CHECK: cmask.spec @causal attributes {cmask.preprocess_kernels = [{kernel = "cmask_causal_preprocess", stages = {{\[\[\[}}"check", 0, -1], ["check", 1, -1], ["rows", 0, -1], ["rows", 1, -1], ["seqs", 0, 0], ["seqs", 1, 0], ["envinit", 0, 0], ["envinit", 1, 0]], {{\[\[}}"env", 0, 0], ["env", 1, 0]],
// CHECK-SAME: {{\[\[}}"fill", 0, 0], ["fill", 1, 0]]]}]
// CHECK: gpu.module @cmask_preprocess {
// CHECK-DAG: func.func private @cmask_causal_rows_item(%{{.*}}: index, %{{.*}}: i32,
// CHECK-DAG: func.func private @cmask_causal__columns_rows_item(
// CHECK-DAG: func.func private @cmask_causal_128x64_tiles_item(
// The column direction's shapes default to the rows'.
// CHECK-DAG: func.func private @cmask_causal__columns_128x64_tiles_item(
// One item count per phase (20), the argument groups, the sync buffer; a
// shared word passes the block's ticket.
// CHECK: gpu.func @cmask_causal_preprocess(%arg0: index, {{(%arg[0-9]+: index, )+}}%arg20: i32, %arg21: memref<?xi32>
// CHECK-SAME: %[[SYNC:[^:]*]]: memref<?xi32>) workgroup(%[[SLOT:.*]] : memref<1xi32, #gpu.address_space<workgroup>>) kernel {
// CHECK:   %[[TICKET:.*]] = memref.atomic_rmw addi %{{.*}}, %[[SYNC]][%{{.*}}]
// CHECK:   memref.store %[[TICKET]], %[[SLOT]]
// CHECK:   gpu.barrier
// Stage 0: its tickets first, no wait.
// CHECK:   arith.ceildivui
// CHECK:   scf.if
// CHECK:     func.call @cmask_causal_check_item(
// CHECK:     func.call @cmask_causal__columns_check_item(
// CHECK:     func.call @cmask_causal_rows_item(
// CHECK:     func.call @cmask_causal__columns_rows_item(
// A block done: barrier, then (its first thread) release and count.
// CHECK:     gpu.barrier
// CHECK:     llvm.inline_asm has_side_effects "fence.acq_rel.gpu;"
// CHECK:     memref.atomic_rmw addi %{{.*}}, %[[SYNC]][%c1{{(_[0-9]+)?}}]
// Stage 1 waits until stage 0's blocks have all finished (sync[1], 4 bytes
// in): relaxed loads between growing sleeps, then an acquire fence.
// CHECK:   scf.if
// CHECK:       memref.extract_aligned_pointer_as_index %[[SYNC]]
// CHECK:       arith.constant 4 : i64
// CHECK:       scf.while
// CHECK:         llvm.inline_asm has_side_effects "ld.relaxed.gpu.u32 $0, [$1];"
// CHECK:         llvm.inline_asm has_side_effects "nanosleep.u32 $0;"
// CHECK:       llvm.inline_asm has_side_effects "fence.acq_rel.gpu;"
// CHECK:     gpu.barrier
// CHECK:     func.call @cmask_causal_128x64_env_item(
// CHECK:     func.call @cmask_causal_128x64_fill_item(
// CHECK:     func.call @cmask_causal__columns_128x64_fill_item(
// CHECK:     memref.atomic_rmw addi %{{.*}}, %[[SYNC]][%c7{{(_[0-9]+)?}}]
// TWO: gpu.func @cmask_causal_preprocess(
// Four tile shapes pass the 4 KB of kernel parameters in one kernel: two,
// each running every stage; the first for the row groups and the rows' tile
// shapes, the second (launched after it) for the columns' tile shapes.
// SPLIT: cmask.preprocess_kernels = [{kernel = "cmask_causal_preprocess0", stages = {{\[\[\[}}"check", 0, -1], ["check", 1, -1], ["rows", 0, -1], ["rows", 1, -1], ["seqs", 0, 0], ["seqs", 0, 1], ["seqs", 0, 2], ["seqs", 0, 3], ["envinit", 0, 0],
// SPLIT-SAME: {{\[\[}}"fill", 0, 0], ["fill", 0, 1], ["fill", 0, 2], ["fill", 0, 3]]]}, {kernel = "cmask_causal_preprocess1", stages = {{\[\[\[}}"seqs", 1, 0],
// SPLIT-SAME: {{\[\[}}"fill", 1, 0], ["fill", 1, 1], ["fill", 1, 2], ["fill", 1, 3]]]}]
// SPLIT: gpu.func @cmask_causal_preprocess0(
// SPLIT: gpu.func @cmask_causal_preprocess1(
// SHAPES: error: convert-cmask-to-gpu: tile-shapes: '128' is not QxK with positive integers
// RUN: echo "" | not cmask-opt --convert-cmask-to-gpu 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: convert-cmask-to-gpu: no cmask.spec in the input

// A spec must be in slot form.
// expected-error @+1 {{'cmask.spec' op is not in slot form; run cmask-lower-to-intervals first}}
cmask.spec @rules {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}
