// Metadata files written to break the reader: each gives one located error
// and a non-zero exit within bounded time and memory (docs/metadata-json.md,
// Limits). `not` fails on a crash, so an exit by signal fails the test.

// Nested 50,000 deep: the reader is iterative and stops at 64 levels.
// RUN: %python -c "print('[' * 50000 + ']' * 50000)" > %t.deep.json
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%t.deep.json 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: deep.json:1:65: error: not valid JSON: arrays and objects nested more than 64 deep (a metadata file needs at most 5)

// A key given twice (JSON readers keep one of the values silently).
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-duplicate-key.json 2>&1 | FileCheck %s --check-prefix=DUP
// DUP: causal-duplicate-key.json:2:42: error: duplicate key "q_len" in an object (JSON readers would silently keep one of the values)

// Integral floats and exponents are not integers.
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal-integral-float.json 2>&1 | FileCheck %s --check-prefix=FLOAT
// FLOAT: causal-integral-float.json:1:26: error: `3.0` is not an integer (a metadata file holds integers only: lengths, boundaries, scalars)
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal-exponent.json 2>&1 | FileCheck %s --check-prefix=EXP
// EXP: causal-exponent.json:1:38: error: `1e3` is not an integer

// 2^31 - 1 query rows: refused before anything is allocated or printed, in
// every mode.
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-huge.json 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-descriptor-json --metadata=%S/Inputs/causal-huge.json 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: causal-huge.json:1:26: error: sequences[0].q_len: cmask-translate evaluates batches of at most 4194304 query rows in all; this one has 2147483647 so far (docs/metadata-json.md, Limits)
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal-huge.json 2>&1 | FileCheck %s --check-prefix=HUGE-DENSE
// HUGE-DENSE: causal-huge.json:1:26: error: sequences[0].q_len: --cmask-to-dense-json evaluates batches of at most 4194304 query rows in all

// Within the row limits, but the dense mask of the second batch has 2^28
// elements: refused before the first batch is printed.
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal-wide.json 2>&1 | FileCheck %s --check-prefix=WIDE --implicit-check-not=regions
// WIDE: causal-wide.json:3:28: error: batch 1: sequences[0].q_len: --cmask-to-dense-json evaluates batches of at most 67108864 (query, key) pairs in all; this one has 268435456 so far

// The descriptor of 4x4 tiles over 16384 queries and keys: more words than
// the CPU twin builds, refused before it allocates.
// RUN: not cmask-translate %masks/causal.mlir --cmask-to-descriptor-json --tile-shapes=4x4 --metadata=%S/Inputs/causal-wide.json 2>&1 | FileCheck %s --check-prefix=TILES
// TILES: causal-wide.json:3:3: error: the descriptor of this batch takes {{[0-9]+}} int32 words; the CPU twin builds at most 67108864
