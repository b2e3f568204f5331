// RUN: not cmask-opt %s 2>&1 | FileCheck %s --implicit-check-not=error:
// RUN: %if valgrind %{ not valgrind -q --error-exitcode=1 cmask-opt %s 2>&1 | FileCheck %s --implicit-check-not=Invalid --implicit-check-not=error: %}

// A spec whose rule uses a value of a later region, truncated inside that
// region's op. The rule's forward reference must not be resolved into the
// later region: when the truncated op is thrown away, a resolved use would
// point at freed memory (heap corruption in the parser's cleanup; MLIR's
// ODS-generated parsers keep regions outside the parser's cleanup). The
// input ends inside the last rule below.

// CHECK: parse-truncated.mlir:[[# @LINE + 18]]:11: error: expected operation name in quotes
cmask.spec @hstu_ctx_varlen {
  cmask.metadata @contextual : scalar
  cmask.metadata @num_targets : per_sequence
  cmask.region @context guard {
    %i = cmask.var i
    %c = cmask.meta @contextual
    %g = cmask.cmp lt, %i, %c
    cmask.yield %g : i1
  } rule {
    %j = cmask.var j
    %v = cmask.cmp lt, %j, %ht
    cmask.yield %v : i1
  }
  cmask.region @history guard {
    %ht = cmask.sub %ql, %nt
    %g = cmask.cmp lt, %i, %ht
    cmask.yield %g : i1
  } rule {
