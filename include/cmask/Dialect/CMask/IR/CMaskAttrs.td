//===- CMaskAttrs.td - cmask enums and attributes ----------*- tablegen -*-===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKATTRS_TD
#define CMASK_DIALECT_CMASK_IR_CMASKATTRS_TD

include "cmask/Dialect/CMask/IR/CMaskDialect.td"
include "mlir/IR/EnumAttr.td"

def CMask_Builtin : I32EnumAttr<"Builtin", "a built-in variable of a rule", [
    I32EnumAttrCase<"i", 0>,
    I32EnumAttrCase<"j", 1>,
    I32EnumAttrCase<"b", 2>,
    I32EnumAttrCase<"q_len", 3>,
    I32EnumAttrCase<"k_len", 4>
  ]> {
  let cppNamespace = "::mlir::cmask";
}

def CMask_MetadataRole : I32EnumAttr<"MetadataRole",
    "how a metadata input is supplied and indexed", [
    I32EnumAttrCase<"scalar", 0>,
    I32EnumAttrCase<"per_sequence", 1>,
    I32EnumAttrCase<"offsets", 2>
  ]> {
  let cppNamespace = "::mlir::cmask";
}

def CMask_CmpPredicate : I32EnumAttr<"CmpPredicate", "an integer comparison", [
    I32EnumAttrCase<"eq", 0>,
    I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>,
    I32EnumAttrCase<"ge", 5>
  ]> {
  let cppNamespace = "::mlir::cmask";
}

#endif // CMASK_DIALECT_CMASK_IR_CMASKATTRS_TD
