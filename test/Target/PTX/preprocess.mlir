// The preprocess kernels of a spec, through the GPU/NVVM dialects to PTX.
// RUN: cmask-translate %s --cmask-to-ptx --arch=sm_90a --tile-shapes=128x128,128x64 | FileCheck %s
// RUN: cmask-translate %s --cmask-to-ptx --arch=sm_80 --tile-shapes=128x64 | FileCheck %s --check-prefix=SM80
// RUN: not cmask-translate %s --cmask-to-ptx --arch=sm_70 2>&1 | FileCheck %s --check-prefix=ARCH

// One kernel for the seven stages (docs/descriptor.md): the phases of both
// directions and both shapes fused; nothing else is an entry point. Its
// blocks take tickets and wait for the stage before through `sync`.
// CHECK: .target sm_90a
// CHECK: .visible .entry cmask_window_preprocess(
// CHECK-NOT: .visible .entry
// CHECK: atom.global.add.u32
// CHECK: fence.acq_rel.gpu;
// CHECK: ld.relaxed.gpu.u32
// CHECK: nanosleep.u32
// SM80: .target sm_80
// SM80: .visible .entry cmask_window_preprocess(
// ARCH: --arch=sm_70 is not supported; use sm_90a (Hopper) or sm_80 (Ampere)

cmask.spec @window {
  cmask.metadata @w : scalar
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %w = cmask.meta @w
    %d = cmask.sub %i, %j
    %c0 = cmask.constant 0 : i64
    %a = cmask.cmp ge, %d, %c0
    %b = cmask.cmp le, %d, %w
    %v = cmask.and %a, %b
    cmask.yield %v : i1
  }
}
