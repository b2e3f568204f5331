// The preprocess kernels of a spec, through the GPU/NVVM dialects to PTX.
// RUN: cmask-translate %s --cmask-to-ptx --arch=sm_90a --tile-shapes=128x128,128x64 | FileCheck %s
// RUN: cmask-translate %s --cmask-to-ptx --arch=sm_80 --tile-shapes=128x64 | FileCheck %s --check-prefix=SM80
// RUN: not cmask-translate %s --cmask-to-ptx --arch=sm_70 2>&1 | FileCheck %s --check-prefix=ARCH

// One kernel per stage (docs/descriptor.md): the phases of both directions
// and both shapes fused; nothing else is an entry point.
// CHECK: .target sm_90a
// CHECK-DAG: .visible .entry cmask_window_s0(
// CHECK-DAG: .visible .entry cmask_window_s1(
// CHECK-DAG: .visible .entry cmask_window_s2(
// CHECK-DAG: .visible .entry cmask_window_s3(
// CHECK-DAG: .visible .entry cmask_window_s4(
// CHECK-DAG: .visible .entry cmask_window_s5(
// CHECK-DAG: .visible .entry cmask_window_s6(
// CHECK-NOT: .visible .entry cmask_window_{{[a-z0-9]+_[a-z]}}
// SM80: .target sm_80
// SM80: .visible .entry cmask_window_s0(
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
