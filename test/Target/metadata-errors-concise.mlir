// Metadata-file errors are one line naming the field: they must not dump the
// whole module ("see current operation") after the message.

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-missing-name.json 2>&1 | FileCheck %s --implicit-check-not="see current operation" --implicit-check-not="builtin.module"
// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-dense-json --metadata=%S/Inputs/hstu-missing-name.json 2>&1 | FileCheck %s --implicit-check-not="see current operation" --implicit-check-not="builtin.module"
// CHECK: hstu-missing-name.json:1:55: error: metadata.num_targets: missing (declared as per_sequence)
