// RUN: cmask-opt %masks/document.mlir --cmask-lower-to-intervals | FileCheck %s

// document: K = 1, [seg_start(seg(i)), seg_end(seg(i))).
// CHECK-LABEL: cmask.spec @document attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @all attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[SI:%.+]] = cmask.seg @docs([[I]])
// CHECK-DAG:     [[LO:%.+]] = cmask.seg_start @docs([[SI]])
// CHECK-DAG:     [[HI:%.+]] = cmask.seg_end @docs([[SI]])
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
