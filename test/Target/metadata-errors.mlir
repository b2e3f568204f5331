// Every metadata-file error of cmask-translate names the field, points at
// its line and column, and exits non-zero (docs/metadata-json.md). Both
// evaluators read the file the same way.

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-missing-name.json 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-dense-json --metadata=%S/Inputs/hstu-missing-name.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: hstu-missing-name.json:1:55: error: metadata.num_targets: missing (declared as per_sequence)

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-extra-name.json 2>&1 | FileCheck %s --check-prefix=EXTRA
// EXTRA: hstu-extra-name.json:1:90: error: metadata.window: is not declared by spec @hstu

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-scalar-type.json 2>&1 | FileCheck %s --check-prefix=SCALAR
// SCALAR: hstu-scalar-type.json:1:67: error: metadata.context: is scalar metadata: must be a 32-bit integer

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-per-sequence-type.json 2>&1 | FileCheck %s --check-prefix=PERSEQ
// PERSEQ: hstu-per-sequence-type.json:1:85: error: metadata.num_targets: is per_sequence metadata: must be an array with one integer per sequence

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-per-sequence-entry-type.json 2>&1 | FileCheck %s --check-prefix=PERSEQ-ENTRY
// PERSEQ-ENTRY: hstu-per-sequence-entry-type.json:1:86: error: metadata.num_targets[0]: must be a 32-bit integer

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-per-sequence-length.json 2>&1 | FileCheck %s --check-prefix=PERSEQ-LEN
// PERSEQ-LEN: hstu-per-sequence-length.json:1:111: error: metadata.num_targets: has 1 entries but the batch has 2 sequences

// RUN: not cmask-translate %masks/document.mlir --cmask-to-dense-json --metadata=%S/Inputs/docs-offsets-type.json 2>&1 | FileCheck %s --check-prefix=OFFSETS
// OFFSETS: docs-offsets-type.json:1:92: error: metadata.docs: is offsets metadata: must be an array with one array of boundaries per sequence

// RUN: not cmask-translate %masks/document.mlir --cmask-to-dense-json --metadata=%S/Inputs/docs-offsets-inner-type.json 2>&1 | FileCheck %s --check-prefix=OFFSETS-INNER
// OFFSETS-INNER: docs-offsets-inner-type.json:1:104: error: metadata.docs[1]: must be an array of boundaries (integers)

// RUN: not cmask-translate %masks/document.mlir --cmask-to-intervals-json --metadata=%S/Inputs/docs-length.json 2>&1 | FileCheck %s --check-prefix=OFFSETS-LEN
// OFFSETS-LEN: docs-length.json:1:92: error: metadata.docs: has 1 entries but the batch has 2 sequences

// RUN: not cmask-translate %masks/document.mlir --cmask-to-intervals-json --metadata=%S/Inputs/docs-decreasing.json 2>&1 | FileCheck %s --check-prefix=DECREASING
// DECREASING: docs-decreasing.json:1:100: error: metadata.docs[0][2]: offsets must be non-decreasing (3 after 9)

// RUN: not cmask-translate %masks/document.mlir --cmask-to-intervals-json --metadata=%S/Inputs/docs-past-end.json 2>&1 | FileCheck %s --check-prefix=PAST-END
// PAST-END: docs-past-end.json:1:99: error: metadata.docs[1][0]: offset 6 is past the sequence's length 5

// RUN: not cmask-translate %masks/document.mlir --cmask-to-intervals-json --metadata=%S/Inputs/docs-negative.json 2>&1 | FileCheck %s --check-prefix=NEG-OFFSET
// NEG-OFFSET: docs-negative.json:1:99: error: metadata.docs[1][0]: offsets must not be negative (got -1)

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu-negative-q-len.json 2>&1 | FileCheck %s --check-prefix=NEG-QLEN
// NEG-QLEN: hstu-negative-q-len.json:1:26: error: sequences[0].q_len: must not be negative (got -1)

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-seq-missing.json 2>&1 | FileCheck %s --check-prefix=SEQ-MISSING
// SEQ-MISSING: causal-seq-missing.json:1:16: error: sequences[0]: missing "k_len"

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-float.json 2>&1 | FileCheck %s --check-prefix=SEQ-FLOAT
// SEQ-FLOAT: causal-float.json:1:26: error: `2.5` is not an integer (a metadata file holds integers only: lengths, boundaries, scalars)

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-seq-extra.json 2>&1 | FileCheck %s --check-prefix=SEQ-EXTRA
// SEQ-EXTRA: causal-seq-extra.json:1:41: error: sequences[0].extra: unknown key; a sequence has q_len, k_len and (for --cmask-to-descriptor-json) q_window, k_window

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-root-extra.json 2>&1 | FileCheck %s --check-prefix=ROOT-EXTRA
// ROOT-EXTRA: causal-root-extra.json:1:19: error: meta: unknown key; a batch has only "sequences" and "metadata"

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/no-sequences.json 2>&1 | FileCheck %s --check-prefix=NO-SEQ
// NO-SEQ: no-sequences.json:1:1: error: sequences: missing or not an array of {"q_len", "k_len"}

// In an array of batches, the error names the batch.
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-batches-bad.json 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: causal-batches-bad.json:1:70: error: batch 1: sequences[0].q_len: must not be negative (got -1)

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/invalid.json 2>&1 | FileCheck %s --check-prefix=INVALID
// INVALID: invalid.json:2:1: error: not valid JSON: unexpected end of the document

// RUN: not cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/does-not-exist.json 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: does-not-exist.json:0:0: error: cannot read the metadata file: No such file or directory

// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json 2>&1 | FileCheck %s --check-prefix=NO-METADATA
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-dense-json 2>&1 | FileCheck %s --check-prefix=NO-METADATA
// NO-METADATA: error: --metadata=FILE is required (see docs/metadata-json.md)

// RUN: not cmask-translate %S/Inputs/two-specs.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=TWO-SPECS
// TWO-SPECS: error: expected exactly one cmask.spec in the input, found 2

// RUN: not cmask-translate %S/Inputs/empty.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=NO-SPEC
// RUN: not cmask-translate %S/Inputs/empty.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --check-prefix=NO-SPEC
// NO-SPEC: error: expected exactly one cmask.spec in the input, found 0
