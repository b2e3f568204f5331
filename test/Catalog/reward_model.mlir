// RUN: cmask-opt %masks/reward_model.mlir --cmask-lower-to-intervals | FileCheck %s

// reward_model: @prompt K = 1, [0, i + 1); @response K = 2, [0, P) and
// [seg_start(seg(i)), min(seg_end(seg(i)), i + 1)) where the min is i + 1
// (i < seg_end(seg(i)) always); spec K = 2.
// CHECK-LABEL: cmask.spec @reward_model attributes {num_slots = 2 : i64} {
// CHECK:       cmask.region @prompt attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[IP1]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @response attributes {num_slots = 2 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[B:%.+]] = cmask.var b
// CHECK-DAG:     [[P:%.+]] = cmask.lookup @prompt_len{{\[}}[[B]]]
// CHECK-DAG:     [[S0:%.+]] = cmask.slot {{\[}}[[C0]], [[P]]) if {{%.+}}
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[SI:%.+]] = cmask.seg @responses([[I]])
// CHECK-DAG:     [[LO:%.+]] = cmask.seg_start @responses([[SI]])
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[S1:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if {{%.+}}
// CHECK:         cmask.slots [[S0]], [[S1]]{{$}}
