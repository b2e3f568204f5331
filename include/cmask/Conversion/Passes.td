//===- Passes.td - cmask conversion passes -----------------*- tablegen -*-===//
//
// From a MaskSpec in slot form to GPU code.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_CONVERSION_PASSES_TD
#define CMASK_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCMaskToGPUPass : Pass<"convert-cmask-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Build the mask-specific preprocess and attention kernels for the GPU";
  let description = [{
    For every `cmask.spec @s` in slot form (after
    `cmask-lower-to-intervals`), builds its preprocess (docs/descriptor.md)
    into `gpu.module @cmask_preprocess`: one function per phase computing
    one work item (scf/arith/memref, generated from the canonical slots),
    and the kernel `@cmask_<s>_preprocess` that runs their seven stages in
    one launch (a block of a stage waits for the stage before through the
    kernel's `sync` buffer; where the parameters would pass CUDA's 4 KB,
    `@cmask_<s>_preprocess0`, `1`, ... each run the stages for some of the
    argument groups), for the row
    direction with `tile-shapes` (query tile x key tile). When the module
    also holds `@s__columns` in slot form (the column direction, from
    `cmask-transpose-spec`), its phases join the same stages with
    `column-tile-shapes` (key tile x query tile; default: `tile-shapes`).
    The launch plan goes on the spec as `cmask.preprocess_kernels`: the
    kernels in launch order, each with its stages and their phases as
    `[phase, direction, shape]`.

    The attention forward (docs/attention.md) goes into
    `gpu.module @cmask_attention`: one kernel
    `@cmask_<s>_fwd_<dtype>_d<D>_<QxK>` per element type of
    `attention-dtypes`, head dimension of `attention-head-dims` and tile
    shape of `tile-shapes` with 128 query rows and 64 or 128 keys, built by
    one parameterized builder for sm_90a: a producer warpgroup streams the
    K/V tiles of the query tile's list through a TMA + mbarrier ring, two
    consumer warpgroups run wgmma and the online softmax, and only partial
    tiles (or tiles that cross `k_len`) check the slots that intersect them.
    Their names go on the spec as `cmask.attention`. An empty
    `attention-head-dims` builds none.

    With `attention-backward` (the default), the backward kernels join them
    for every element type and head dimension: `@cmask_<s>_bwd_<dtype>_d<D>`
    and its `_pre`, `_dq` and `_dqr` kernels (docs/attention.md). With the
    column spec they walk its 128x64 tiles and mask with the column
    intervals; without it (the column mode `rows`) they list the row
    direction's 128x128 (else 128x64) tiles and mask with the row
    intervals. Their names go on the spec as `cmask.attention_backward`;
    when the tile shapes they need are missing, a warning says which and
    none are built.

    `cmask-gpu-to-nvvm` and `cmask-gpu-to-binary` then lower the result to
    NVVM and to PTX (`cmask-spec-to-gpu` runs this pass with the lowering to
    slots before it; `cmask-translate --cmask-to-ptx` and
    `--cmask-to-artifact` run all of it).

    ```mlir
    // cmask-opt causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals \
    //   --convert-cmask-to-gpu=tile-shapes=128x64
    gpu.module @cmask_preprocess {
      func.func private @cmask_causal_rows_item(%item: index, %num_seqs: i32, ...)
      ...
      gpu.func @cmask_causal_preprocess(%n0: index, ..., %num_seqs: i32, ...,
          %sync: memref<?xi32>) workgroup(%ticket : memref<1xi32, 3>) kernel
      ...
    }
    gpu.module @cmask_attention {
      gpu.func @cmask_causal_fwd_bf16_d128_128x64(%tmQ: !llvm.ptr, ...) kernel
          attributes {cmask.tensor_map_args = array<i32: 0, 1, 2>, ...}
    }
    ```
  }];
  let options = [
    Option<"tileShapes", "tile-shapes", "std::string", /*default=*/"\"128x128,128x64\"",
           "Tile shapes of the row direction, QxK, comma separated">,
    Option<"columnTileShapes", "column-tile-shapes", "std::string", /*default=*/"\"\"",
           "Tile shapes of the column direction, KxQ (default: tile-shapes)">,
    Option<"attentionHeadDims", "attention-head-dims", "std::string", /*default=*/"\"128\"",
           "Head dimensions of the attention kernels (64, 128), comma separated; empty: none">,
    Option<"attentionDtypes", "attention-dtypes", "std::string", /*default=*/"\"bf16\"",
           "Element types of the attention kernels (bf16, f16), comma separated">,
    Option<"attentionBackward", "attention-backward", "bool", /*default=*/"true",
           "Also build the backward kernels of every element type and head dimension">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def MarkTensorMapArgsPass
    : Pass<"cmask-mark-tensor-map-args", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Make the tensor-map arguments of the kernels 128-byte grid constants";
  let description = [{
    The attention kernels take their TMA descriptors (CUtensorMap, 128
    bytes) by value, as launch parameters, and list their indices in
    `cmask.tensor_map_args`. The GPU-to-NVVM conversion drops by-value
    argument attributes, and NVPTX copies a by-value argument whose address
    escapes to local memory unless it is a grid constant (TMA cannot read
    local memory). This pass, run on every `gpu.module` once its kernels are
    `llvm.func`s, gives each listed argument `llvm.byval = !llvm.array<128 x
    i8>`, `llvm.align = 64` and `nvvm.grid_constant` (PTX:
    `.param .align 64 .b8 name[128]`), then drops the list.

    Input:
    ```mlir
    llvm.func @k(%tm: !llvm.ptr, %n: i32) attributes {
        cmask.tensor_map_args = array<i32: 0>, gpu.kernel, nvvm.kernel}
    ```
    Output:
    ```mlir
    llvm.func @k(%tm: !llvm.ptr {llvm.align = 64 : i64,
                                  llvm.byval = !llvm.array<128 x i8>,
                                  nvvm.grid_constant}, %n: i32)
        attributes {gpu.kernel, nvvm.kernel}
    ```
    A listed index that is not a pointer argument, or a list left on a
    kernel that is not yet an `llvm.func`, is an error at the kernel.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

#endif // CMASK_CONVERSION_PASSES_TD
