// RUN: cmask-opt %masks/sliding_window.mlir --cmask-lower-to-intervals | FileCheck %s

// sliding_window: K = 1, [i - window, i + 1).
// CHECK-LABEL: cmask.spec @sliding_window attributes {num_slots = 1 : i64} {
// CHECK:       cmask.region @all attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[W:%.+]] = cmask.meta @window
// CHECK-DAG:     [[LO:%.+]] = cmask.sub [[I]], [[W]]
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
