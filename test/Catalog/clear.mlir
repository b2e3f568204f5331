// RUN: cmask-opt %masks/clear.mlir --cmask-lower-to-intervals | FileCheck %s
// The catalog spec survives a print/parse round trip (negative union bounds).
// RUN: cmask-opt %masks/clear.mlir | cmask-opt --cmask-lower-to-intervals | FileCheck %s

// clear: @text K = 1, [0, k_len); @image K = 1 + (2R + 1) = 34 for R = 16:
// [0, T) and one slot per grid-row offset d in [-16, 16]. Spec K = 34.
// CHECK-LABEL: cmask.spec @clear attributes {num_slots = 34 : i64, symmetric} {
// CHECK:       cmask.region @text attributes {num_slots = 1 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[KL]]) if {{%.+}}
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @image attributes {num_slots = 34 : i64} guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[T:%.+]] = cmask.meta @text_len
// CHECK:         [[TEXT:%.+]] = cmask.slot {{\[}}[[C0]], [[T]]) if {{%.+}}
// d = -16: the row condition starts with d * d = 256 <= r * r.
// CHECK:         [[R:%.+]] = cmask.meta @radius
// CHECK:         [[RR:%.+]] = cmask.mul [[R]], [[R]]
// CHECK:         [[C256:%.+]] = cmask.constant 256 : i64
// CHECK:         cmask.isqrt
// CHECK:         cmask.cmp le, {{%.+}}, [[RR]]
// CHECK-COUNT-33: cmask.slot {{\[}}
// CHECK-NOT:     cmask.slot {{\[}}
// CHECK:         cmask.slots [[TEXT]]{{(, %[0-9]+){33}$}}
// CHECK-NOT:   cmask.any
