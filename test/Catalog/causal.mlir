// RUN: cmask-opt %masks/causal.mlir --cmask-lower-to-intervals | FileCheck %s

// causal: K = 1, [0, i + 1).
// CHECK-LABEL: cmask.spec @causal attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @all attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[C1:%.+]] = cmask.constant 1 : i64
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], [[C1]]
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[HI]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK-NOT:   cmask.var j
