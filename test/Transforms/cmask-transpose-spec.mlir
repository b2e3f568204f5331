// RUN: cmask-opt %s --cmask-transpose-spec | FileCheck %s
// RUN: cmask-opt %s --cmask-transpose-spec --cmask-lower-to-intervals | FileCheck %s --check-prefix=SLOTS
// RUN: cmask-opt %s --cmask-transpose-spec --cmask-transpose-spec | FileCheck %s --check-prefix=TWICE

// Two regions: rows below @p are causal, the others see [0, p). The column
// spec keeps the metadata, has one region that applies everywhere, and its
// rule is (guard0 and rule0) or (not guard0 and guard1 and rule1) with i/j
// and q_len/k_len exchanged.
cmask.spec @two {
  cmask.metadata @p : scalar
  cmask.region @head guard {
    %i = cmask.var i
    %p = cmask.meta @p
    %g = cmask.cmp lt, %i, %p
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
  cmask.region @tail guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %kl = cmask.var k_len
    %p = cmask.meta @p
    %m = cmask.min %p, %kl
    %v = cmask.cmp lt, %j, %m
    cmask.yield %v : i1
  }
}

// CHECK-LABEL: cmask.spec @two {
// CHECK-LABEL: cmask.spec @two__columns {
// CHECK-NEXT:    cmask.metadata @p : scalar
// CHECK-NEXT:    cmask.region @columns guard {
// CHECK-NEXT:      %[[T:.+]] = cmask.constant true
// CHECK-NEXT:      cmask.yield %[[T]] : i1
// CHECK-NEXT:    } rule {
// The guard of @head, on what is now the key: var j.
// CHECK-NEXT:      %[[GI:.+]] = cmask.var j
// CHECK-NEXT:      %[[P:.+]] = cmask.meta @p
// CHECK-NEXT:      %[[G0:.+]] = cmask.cmp lt, %[[GI]], %[[P]]
// CHECK-NEXT:      %[[RI:.+]] = cmask.var j
// CHECK-NEXT:      %[[RJ:.+]] = cmask.var i
// CHECK-NEXT:      %[[R0:.+]] = cmask.cmp le, %[[RJ]], %[[RI]]
// CHECK-NEXT:      %[[C0:.+]] = cmask.and %[[G0]], %[[R0]]
// CHECK-NEXT:      %[[N0:.+]] = cmask.not %[[G0]]
// CHECK-NEXT:      %[[G1:.+]] = cmask.constant true
// CHECK-NEXT:      %[[J1:.+]] = cmask.var i
// CHECK-NEXT:      %[[QL:.+]] = cmask.var q_len
// CHECK:           %[[C1:.+]] = cmask.and %[[N0]], %[[G1]], %{{.+}}
// CHECK-NEXT:      %[[V:.+]] = cmask.or %[[C0]], %[[C1]]
// CHECK-NEXT:      cmask.yield %[[V]] : i1

// Key column i is seen by the @head rows j in [i, p) and by every @tail row
// j >= p when i < min(p, q_len): two slots.
// SLOTS-LABEL: cmask.spec @two__columns attributes {num_slots = 2 : i64}
// SLOTS:         cmask.slots %{{[0-9a-z_]+}}, %{{[0-9a-z_]+}}{{$}}

// Transposing twice adds a column spec of the column spec; the names do not
// clash.
// TWICE: cmask.spec @two__columns__columns
