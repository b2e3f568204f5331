// Malformed inputs give a located error and a non-zero exit, never a crash.

// An empty file is an empty module: cmask-opt reports that there is no spec
// to lower; cmask-translate needs exactly one spec.
// RUN: not cmask-opt %S/Inputs/empty.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=EMPTY-OPT --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// EMPTY-OPT: empty.mlir:{{[0-9]+}}:{{[0-9]+}}: error: no cmask.spec to lower in the input
// RUN: not cmask-translate %S/Inputs/empty.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=EMPTY-TR --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/empty.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=EMPTY-TR --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// EMPTY-TR: empty.mlir:{{[0-9]+}}:{{[0-9]+}}: error: expected exactly one cmask.spec in the input, found 0

// Garbage text.
// RUN: not cmask-opt %S/Inputs/garbage.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=GARBAGE --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/garbage.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=GARBAGE --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// GARBAGE: garbage.mlir:1:1: error: custom op 'this' is unknown

// Binary bytes.
// RUN: not cmask-opt %S/Inputs/binary.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/binary.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// BINARY: binary.mlir:1:{{[0-9]+}}: error: unexpected character

// A spec cut off in the middle.
// RUN: not cmask-opt %S/Inputs/truncated.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=TRUNCATED --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/truncated.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=TRUNCATED --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// TRUNCATED: truncated.mlir:12:{{[0-9]+}}: error: expected operation name in quotes

// A spec the verifier rejects: both tools stop at the verifier's diagnostic.
// RUN: not cmask-opt %S/Inputs/invalid-spec.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=INVALID --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/invalid-spec.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=INVALID --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/invalid-spec.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=INVALID --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// INVALID: invalid-spec.mlir:8:11: error: 'cmask.mul' op cannot isolate j: both factors depend on j

// A spec the analysis rejects: the lowering fails at the atom; the dense
// oracle does not lower and still evaluates it.
// RUN: not cmask-opt %S/Inputs/unisolable.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --check-prefix=UNISOLABLE --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/unisolable.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=UNISOLABLE --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// UNISOLABLE: unisolable.mlir:11:10: error: cannot isolate j in `j + (j floordiv 2) <= i`
// UNISOLABLE: unisolable.mlir:2:3: note: while normalizing the rule of region @all
// RUN: cmask-translate %S/Inputs/unisolable.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json | FileCheck %s --check-prefix=UNISOLABLE-DENSE
// UNISOLABLE-DENSE: "rows":["100","110","110"]
