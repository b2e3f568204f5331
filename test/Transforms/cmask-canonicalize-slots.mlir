// RUN: cmask-opt %s -split-input-file --cmask-normalize-dnf --cmask-extract-intervals --cmask-canonicalize-slots | FileCheck %s

// cmask-canonicalize-slots: drop empty, duplicate and subsumed slots, merge
// provably adjacent ones, record num_slots (K) per region and on the spec.
// Regions already in slot form pass through normalize/extract unchanged.

// Prefix-LM `j < p or j <= i`: [0, p) and [0, i + 1) merge to [0, max(p, i + 1)).
// CHECK-LABEL: cmask.spec @prefix_lm attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @all attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[B:%.+]] = cmask.var b
// CHECK-DAG:     [[P:%.+]] = cmask.lookup @prefix_len{{\[}}[[B]]]
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[HI:%.+]] = cmask.max [[P]], [[IP1]]
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[HI]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
cmask.spec @prefix_lm {
  cmask.metadata @prefix_len : per_sequence
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %b = cmask.var b
    %p = cmask.lookup @prefix_len[%b]
    %in_prefix = cmask.cmp lt, %j, %p
    %causal = cmask.cmp le, %j, %i
    %v = cmask.or %in_prefix, %causal
    cmask.yield %v : i1
  }
}

// -----

// HSTU history: rows of @history have i >= c because the earlier guard
// `i < c` failed, so [0, c) and [c, i + 1) merge to [0, i + 1).
// CHECK-LABEL: cmask.spec @hstu_history attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @contextual attributes {num_slots = 1 : i64} guard {
// CHECK:       cmask.region @history attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[IP1]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// The same rule without the earlier guard needs the max.
// CHECK-LABEL: cmask.spec @history_alone attributes {num_slots = 1 : i64} {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[C:%.+]] = cmask.meta @context
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[HI:%.+]] = cmask.max [[C]], [[IP1]]
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[HI]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
cmask.spec @hstu_history {
  cmask.metadata @context : scalar
  cmask.region @contextual guard {
    %i = cmask.var i
    %c = cmask.meta @context
    %g = cmask.cmp lt, %i, %c
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  cmask.region @history guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c = cmask.meta @context
    %in_ctx = cmask.cmp lt, %j, %c
    %after_ctx = cmask.cmp ge, %j, %c
    %causal = cmask.cmp le, %j, %i
    %hist = cmask.and %after_ctx, %causal
    %v = cmask.or %in_ctx, %hist
    cmask.yield %v : i1
  }
}
cmask.spec @history_alone {
  cmask.metadata @context : scalar
  cmask.region @history guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c = cmask.meta @context
    %in_ctx = cmask.cmp lt, %j, %c
    %after_ctx = cmask.cmp ge, %j, %c
    %causal = cmask.cmp le, %j, %i
    %hist = cmask.and %after_ctx, %causal
    %v = cmask.or %in_ctx, %hist
    cmask.yield %v : i1
  }
}

// -----

// Hand-written slots: a duplicate, a subsumed slot and empty slots go; the
// region and the spec record K.
// CHECK-LABEL: cmask.spec @cleanup attributes {num_slots = 2 : i64} {
// CHECK:       cmask.region @first attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[IP1]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @unreachable_rows attributes {num_slots = 0 : i64} guard {
// CHECK:       } rule {
// CHECK-NEXT:    cmask.slots{{$}}
// CHECK-NEXT:  }
// CHECK:       cmask.region @apart attributes {num_slots = 2 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[P:%.+]] = cmask.meta @p
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK-DAG:     [[LO:%.+]] = cmask.add {{%.+}}, {{%.+}}
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:     [[S0:%.+]] = cmask.slot {{\[}}[[C0]], [[P]]) if [[T]]
// CHECK-DAG:     [[S1:%.+]] = cmask.slot {{\[}}[[LO]], [[KL]]) if [[T]]
// CHECK:         cmask.slots [[S0]], [[S1]]{{$}}
cmask.spec @cleanup {
  cmask.metadata @p : scalar
  cmask.region @first guard {
    %i = cmask.var i
    %p = cmask.meta @p
    %g = cmask.cmp lt, %i, %p
    cmask.yield %g : i1
  } rule {
    %c0 = cmask.constant 0 : i64
    %i = cmask.var i
    %t = cmask.constant true
    %f = cmask.constant false
    %c1 = cmask.constant 1 : i64
    %ip1 = cmask.add %i, %c1
    %kl = cmask.var k_len
    %s0 = cmask.slot [%c0, %ip1) if %t
    // A duplicate of %s0.
    %s1 = cmask.slot [%c0, %ip1) if %t
    // [i, i + 1) is inside [0, i + 1).
    %s2 = cmask.slot [%i, %ip1) if %t
    // Empty: [i, i).
    %s3 = cmask.slot [%i, %i) if %t
    // Empty: a false row condition.
    %s4 = cmask.slot [%c0, %kl) if %f
    // Empty: [i + 1, i).
    %s5 = cmask.slot [%ip1, %i) if %t
    // Empty after clamping: [k_len, k_len + 1).
    %klp1 = cmask.add %kl, %c1
    %s6 = cmask.slot [%kl, %klp1) if %t
    // Inside [0, i + 1) whenever its condition holds.
    %ge = cmask.cmp ge, %i, %c1
    %s7 = cmask.slot [%c0, %i) if %ge
    cmask.slots %s0, %s1, %s2, %s3, %s4, %s5, %s6, %s7
  }
  cmask.region @unreachable_rows guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // Rows here have i >= p (the earlier guard failed): `i < p` never holds.
    %c0 = cmask.constant 0 : i64
    %kl = cmask.var k_len
    %i = cmask.var i
    %p = cmask.meta @p
    %early = cmask.cmp lt, %i, %p
    %s0 = cmask.slot [%c0, %kl) if %early
    cmask.slots %s0
  }
  cmask.region @apart guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // [0, p) and [i + 2, k_len) with p <= i are not adjacent: two slots.
    %c0 = cmask.constant 0 : i64
    %i = cmask.var i
    %p = cmask.meta @p
    %t = cmask.constant true
    %c2 = cmask.constant 2 : i64
    %ip2 = cmask.add %i, %c2
    %kl = cmask.var k_len
    %s0 = cmask.slot [%c0, %p) if %t
    %s1 = cmask.slot [%ip2, %kl) if %t
    cmask.slots %s0, %s1
  }
}

// -----

// Overlapping slots with the same condition merge, and the max of the upper
// bounds simplifies: [i - w, i + 1) and [i, i + 4) -> [i - w, i + 4).
// CHECK-LABEL: cmask.spec @overlap attributes {num_slots = 1 : i64} {
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[W:%.+]] = cmask.meta @w
// CHECK-DAG:     [[LO:%.+]] = cmask.sub [[I]], [[W]]
// CHECK-DAG:     [[C4:%.+]] = cmask.constant 4 : i64
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], [[C4]]
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
cmask.spec @overlap {
  cmask.metadata @w : scalar
  cmask.region @r guard {
    %i = cmask.var i
    %w = cmask.meta @w
    %c0 = cmask.constant 0 : i64
    %g = cmask.cmp ge, %w, %c0
    cmask.yield %g : i1
  } rule {
    // With w >= 0 (the guard): [i - w, i + 1) and [i, i + 4) overlap.
    %i = cmask.var i
    %w = cmask.meta @w
    %c1 = cmask.constant 1 : i64
    %c4 = cmask.constant 4 : i64
    %t = cmask.constant true
    %lo = cmask.sub %i, %w
    %ip1 = cmask.add %i, %c1
    %ip4 = cmask.add %i, %c4
    %s0 = cmask.slot [%lo, %ip1) if %t
    %s1 = cmask.slot [%i, %ip4) if %t
    cmask.slots %s0, %s1
  }
}

// -----

// A row condition that the region's guard already implies is dropped, so
// `[0, i + 1) if true` and `[i, k_len) if i >= p` (with guard i >= p) have
// the same condition and merge into one slot.
// CHECK-LABEL: cmask.spec @implied_condition attributes {num_slots = 1 : i64} {
// CHECK:         cmask.region @late attributes {num_slots = 1 : i64}
// CHECK:         } rule {
// CHECK-DAG:       %[[ZERO:.+]] = cmask.constant 0 : i64
// CHECK-DAG:       %[[KLEN:.+]] = cmask.var k_len
// CHECK-DAG:       %[[TRUE:.+]] = cmask.constant true
// CHECK:           %[[S:.+]] = cmask.slot [%[[ZERO]], %[[KLEN]]) if %[[TRUE]]
// CHECK-NEXT:      cmask.slots %[[S]]
cmask.spec @implied_condition {
  cmask.metadata @p : scalar
  cmask.region @late guard {
    %i = cmask.var i
    %p = cmask.meta @p
    %g = cmask.cmp ge, %i, %p
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %p = cmask.meta @p
    %a = cmask.cmp le, %j, %i
    %late = cmask.cmp ge, %i, %p
    %after = cmask.cmp ge, %j, %i
    %b = cmask.and %late, %after
    %v = cmask.or %a, %b
    cmask.yield %v : i1
  }
}
