// RUN: cmask-opt %s --cmask-normalize-dnf --cmask-extract-intervals --cmask-canonicalize-slots=max-proofs=2 -verify-diagnostics | FileCheck %s

// Past its proof budget the pass keeps the remaining slots (still exact),
// warns, and records the slot count it reached: here the two prefix-LM slots
// are not merged.
// CHECK-LABEL: cmask.spec @budget attributes {num_slots = 2 : i64}
cmask.spec @budget {
  cmask.metadata @p : scalar
  // expected-warning @below {{canonicalization stopped after 2 proofs: the region's 2 slots are exact but K may not be minimal (raise max-proofs, or split the rule)}}
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %p = cmask.meta @p
    %a = cmask.cmp lt, %j, %p
    %b = cmask.cmp le, %j, %i
    %v = cmask.or %a, %b
    cmask.yield %v : i1
  }
}
