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
    and the stage kernels `@cmask_<s>_s0` ... `@cmask_<s>_s6` that run them,
    for the row direction with `tile-shapes` (query tile x key tile). When
    the module also holds `@s__columns` in slot form (the column direction,
    from `cmask-transpose-spec`), its phases join the same stages with
    `column-tile-shapes` (key tile x query tile; default: `tile-shapes`).
    The launch plan goes on the spec as `cmask.stages`: per stage, its
    kernels and their phases as `[phase, direction, shape]`.

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
    `gpu-lower-to-nvvm-pipeline` then lowers the result to PTX
    (`cmask-translate --cmask-to-ptx` and `--cmask-to-artifact` do both).

    ```mlir
    // cmask-opt causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals \
    //   --convert-cmask-to-gpu=tile-shapes=128x64
    gpu.module @cmask_preprocess {
      func.func private @cmask_causal_rows_item(%item: index, %num_seqs: i32, ...)
      ...
      gpu.func @cmask_causal_s0(%n0: index, ..., %num_seqs: i32, ...) kernel
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
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // CMASK_CONVERSION_PASSES_TD
