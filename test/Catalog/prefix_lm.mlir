// RUN: cmask-opt %masks/prefix_lm.mlir --cmask-lower-to-intervals | FileCheck %s

// prefix_lm: [0, p) and [0, i + 1) merge: K = 1, [0, max(p, i + 1)).
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
