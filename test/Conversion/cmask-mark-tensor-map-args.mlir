// RUN: cmask-opt %s --split-input-file --pass-pipeline="builtin.module(gpu.module(cmask-mark-tensor-map-args))" --verify-diagnostics | FileCheck %s

// The listed arguments become 128-byte, 64-aligned by-value grid constants;
// the others keep their attributes; the list goes.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: i32)
// CHECK-NOT: cmask.tensor_map_args
// CHECK-SAME: attributes {gpu.kernel, nvvm.kernel}
// A kernel without the list is left alone.
// CHECK: llvm.func @plain(%{{.*}}: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel}
gpu.module @kernels {
  llvm.func @k(%tm0: !llvm.ptr, %out: !llvm.ptr {llvm.noalias}, %tm1: !llvm.ptr, %n: i32)
      attributes {cmask.tensor_map_args = array<i32: 0, 2>, gpu.kernel, nvvm.kernel} {
    llvm.return
  }
  llvm.func @plain(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @scalar {
  // expected-error @below {{'llvm.func' op lists tensor-map argument 1, which is not a pointer argument}}
  llvm.func @k(%tm: !llvm.ptr, %n: i32) attributes {cmask.tensor_map_args = array<i32: 1>, nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @range {
  // expected-error @below {{'llvm.func' op lists tensor-map argument 3, which is not a pointer argument}}
  llvm.func @k(%tm: !llvm.ptr) attributes {cmask.tensor_map_args = array<i32: 3>, nvvm.kernel} {
    llvm.return
  }
}

// -----

// Before the GPU-to-NVVM conversion the kernel is still a gpu.func.
gpu.module @early {
  // expected-error @below {{'gpu.func' op lists tensor-map arguments but is not an llvm.func: run cmask-mark-tensor-map-args after the GPU-to-NVVM conversion}}
  gpu.func @k(%tm: !llvm.ptr) kernel attributes {cmask.tensor_map_args = array<i32: 0>} {
    gpu.return
  }
}
