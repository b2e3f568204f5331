// RUN: cmask-opt %masks/hstu.mlir --cmask-lower-to-intervals | FileCheck %s

// hstu: @contextual K = 1, [0, hist_end); @history K = 1 (the earlier guard
// gives i >= c, so [0, c) and [c, i + 1) merge to [0, i + 1)); @target K = 2,
// [0, hist_end) and [i, i + 1). Spec K = 2.
// CHECK-LABEL: cmask.spec @hstu attributes {num_slots = 2 : i64} {
// CHECK:       cmask.region @contextual attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[QL:%.+]] = cmask.var q_len
// CHECK-DAG:     [[B:%.+]] = cmask.var b
// CHECK-DAG:     [[NT:%.+]] = cmask.lookup @num_targets{{\[}}[[B]]]
// CHECK-DAG:     [[HE:%.+]] = cmask.sub [[QL]], [[NT]]
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[HE]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @history attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[IP1]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @target attributes {num_slots = 2 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[QL:%.+]] = cmask.var q_len
// CHECK-DAG:     [[B:%.+]] = cmask.var b
// CHECK-DAG:     [[NT:%.+]] = cmask.lookup @num_targets{{\[}}[[B]]]
// CHECK-DAG:     [[HE:%.+]] = cmask.sub [[QL]], [[NT]]
// CHECK-DAG:     [[S0:%.+]] = cmask.slot {{\[}}[[C0]], [[HE]]) if {{%.+}}
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[S1:%.+]] = cmask.slot {{\[}}[[I]], [[IP1]]) if {{%.+}}
// CHECK:         cmask.slots [[S0]], [[S1]]{{$}}
