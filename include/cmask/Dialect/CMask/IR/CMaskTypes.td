//===- CMaskTypes.td - cmask types -------------------------*- tablegen -*-===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKTYPES_TD
#define CMASK_DIALECT_CMASK_IR_CMASKTYPES_TD

include "cmask/Dialect/CMask/IR/CMaskDialect.td"
include "mlir/IR/AttrTypeBase.td"

def CMask_SlotType : TypeDef<CMask_Dialect, "Slot"> {
  let mnemonic = "slot";
  let summary = "one visible-key interval slot of a region";
  let description = [{
    A value of type `!cmask.slot` is a half-open key interval `[lo, hi)` that
    a row sees when the slot's row condition holds. It is produced by
    `cmask.slot` and consumed by the `cmask.slots` terminator.
  }];
}

#endif // CMASK_DIALECT_CMASK_IR_CMASKTYPES_TD
