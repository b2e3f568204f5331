//===- CMask.td - cmask dialect umbrella -------------------*- tablegen -*-===//
//
// Umbrella file for the cmask dialect: the dialect, its enums, types and ops.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASK_TD
#define CMASK_DIALECT_CMASK_IR_CMASK_TD

include "cmask/Dialect/CMask/IR/CMaskDialect.td"
include "cmask/Dialect/CMask/IR/CMaskAttrs.td"
include "cmask/Dialect/CMask/IR/CMaskTypes.td"
include "cmask/Dialect/CMask/IR/CMaskOps.td"

#endif // CMASK_DIALECT_CMASK_IR_CMASK_TD
