// RUN: cmask-opt %masks/causal_document.mlir --cmask-lower-to-intervals | FileCheck %s

// causal_document: K = 1, [seg_start(seg(i)), min(seg_end(seg(i)), i + 1)),
// and i < seg_end(seg(i)) always, so the upper bound is i + 1.
// CHECK-LABEL: cmask.spec @causal_document attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @all attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[SI:%.+]] = cmask.seg @docs([[I]])
// CHECK-DAG:     [[LO:%.+]] = cmask.seg_start @docs([[SI]])
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if {{%.+}}
// CHECK-NOT:     cmask.min
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
