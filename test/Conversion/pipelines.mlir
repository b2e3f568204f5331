// The registered GPU pipelines: cmask-spec-to-gpu, cmask-gpu-to-nvvm and
// cmask-gpu-to-binary (include/cmask/Conversion/Pipelines.h).
// RUN: cmask-opt --help | FileCheck %s --check-prefix=HELP
// HELP-DAG: --cmask-gpu-to-binary {{.*}}gpu.binary per gpu.module
// HELP-DAG: --cmask-gpu-to-nvvm {{.*}}NVVM and LLVM
// HELP-DAG: --cmask-spec-to-gpu {{.*}}GPU dialects
// HELP-DAG: --cmask-mark-tensor-map-args
// HELP-DAG: --cmask-derive-columns

// End to end: a spec to PTX in one cmask-opt run, both gpu.modules.
// RUN: cmask-opt %masks/causal.mlir --cmask-spec-to-gpu="tile-shapes=128x64 attention-head-dims=64" --cmask-gpu-to-binary -o %t.mlir
// RUN: FileCheck %s --check-prefix=BIN < %t.mlir
// BIN: gpu.binary @cmask_preprocess [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx81">{{.*}}.entry cmask_causal_preprocess(
// BIN: gpu.binary @cmask_attention [#gpu.object<{{.*}}.entry cmask_causal_fwd_bf16_d64_128x64(
// BIN-SAME: .entry cmask_causal_bwd_bf16_d64(
// The same PTX as cmask-translate's artifact (lowerToPTX runs this pipeline;
// one element type and head dimension: one attention module).
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir cmask_preprocess > %t.preprocess.ptx
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir cmask_attention > %t.attention.ptx
// RUN: rm -rf %t.art && cmask-translate %masks/causal.mlir --cmask-to-artifact --tile-shapes=128x64 --head-dims=64 --dtypes=bf16 -o %t.art 2> /dev/null
// RUN: cmp %t.preprocess.ptx %t.art/preprocess.ptx
// RUN: cmp %t.attention.ptx %t.art/attention_bf16_d64.ptx

// Every step is a pass, so each stage can be printed.
// RUN: cmask-opt %masks/causal.mlir --cmask-spec-to-gpu="tile-shapes=128x64 attention-head-dims=64 attention-backward=false" --cmask-gpu-to-nvvm --mlir-print-ir-after-all -o /dev/null 2>&1 | grep "IR Dump After" | FileCheck %s --check-prefix=STAGES
// STAGES: IR Dump After DeriveColumnsPass
// STAGES: IR Dump After RequireSpecPass
// STAGES: IR Dump After NormalizeDNFPass
// STAGES: IR Dump After ExtractIntervalsPass
// STAGES: IR Dump After CanonicalizeSlotsPass
// STAGES: IR Dump After ConvertCMaskToGPUPass
// STAGES: IR Dump After Inliner
// STAGES: IR Dump After ConvertNVGPUToNVVMPass
// STAGES: IR Dump After GpuNVVMAttachTarget
// STAGES: IR Dump After ConvertGpuOpsToNVVMOps
// STAGES: IR Dump After ReconcileUnrealizedCastsPass
// STAGES: IR Dump After MarkTensorMapArgsPass

// After cmask-gpu-to-nvvm the kernels are llvm.funcs and the tensor maps
// grid constants.
// RUN: cmask-opt %masks/causal.mlir --cmask-spec-to-gpu="tile-shapes=128x64 attention-head-dims=64 attention-backward=false" --cmask-gpu-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefix=NVVM
// NVVM: gpu.module @cmask_preprocess [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx81">]
// NVVM: llvm.func @cmask_causal_preprocess(
// NVVM: gpu.module @cmask_attention
// NVVM: llvm.func @cmask_causal_fwd_bf16_d64_128x64(%{{[^:]*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// NVVM-NOT: cmask.tensor_map_args

// Without a column direction (columns=false, or a transposed rule that does
// not lower) the backward checks row intervals, as in cmask-translate's
// artifacts; a bad option is located.
// RUN: cmask-opt %masks/causal.mlir --cmask-spec-to-gpu="columns=false tile-shapes=128x64 attention-head-dims=64" | FileCheck %s --check-prefix=ROWS
// ROWS-NOT: cmask.spec @causal__columns
// ROWS: cmask.attention_backward = ["cmask_causal_bwd_bf16_d64"]
// RUN: cmask-opt %S/../gpu/Inputs/interleaved.mlir --cmask-spec-to-gpu --cmask-gpu-to-binary -o %t.rows.mlir 2>&1 | FileCheck %s --check-prefix=REMARK
// REMARK: remark: column direction: rows
// RUN: %python %S/Inputs/extract_ptx.py %t.rows.mlir cmask_attention > %t.rows.ptx
// RUN: rm -rf %t.rows.art && cmask-translate %S/../gpu/Inputs/interleaved.mlir --cmask-to-artifact --head-dims=128 --dtypes=bf16 -o %t.rows.art 2> /dev/null
// RUN: cmp %t.rows.ptx %t.rows.art/attention_bf16_d128.ptx
// RUN: not cmask-opt %masks/causal.mlir --cmask-spec-to-gpu="tile-shapes=128" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: convert-cmask-to-gpu: tile-shapes: '128' is not QxK with positive integers
