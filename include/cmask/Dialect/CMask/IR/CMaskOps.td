//===- CMaskOps.td - cmask operations ----------------------*- tablegen -*-===//
//
// Operations of the cmask dialect: the MaskSpec structure (spec, metadata,
// region, yield), the rule language (variables, integer arithmetic,
// comparisons, boolean connectives, bounded unions, metadata lookups) and the
// interval form produced by the compiler (slot, slots).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKOPS_TD
#define CMASK_DIALECT_CMASK_IR_CMASKOPS_TD

include "cmask/Dialect/CMask/IR/CMaskDialect.td"
include "cmask/Dialect/CMask/IR/CMaskAttrs.td"
include "cmask/Dialect/CMask/IR/CMaskTypes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class CMask_Op<string mnemonic, list<Trait> traits = []>
    : Op<CMask_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def CMask_SpecOp : CMask_Op<"spec", [
    IsolatedFromAbove, Symbol, SymbolTable, SingleBlock, NoTerminator,
    NoRegionArguments]> {
  let summary = "a mask specification: metadata declarations and regions";
  let description = [{
    Syntax: `cmask.spec @name (attributes {...})? { ... }`.

    A MaskSpec. Its body declares the runtime metadata (`cmask.metadata`)
    and lists the regions (`cmask.region`) in order: the first region whose
    guard holds for a query row applies to it. A row matched by no region
    sees nothing. A spec needs at least one region.

    After `cmask-canonicalize-slots` the spec carries `num_slots`, the
    number of interval slots K of its widest region.

    The backward pass needs the column direction (the query rows that see
    each key column). The compiler derives it by transposing the rule
    (`cmask-transpose-spec`); where the transposed rule cannot be isolated
    (CLEAR's grid uses `i mod W`), a spec may declare itself `symmetric`:
    row `i` sees key `j` exactly when row `j` sees key `i` with `q_len` and
    `k_len` swapped. The column direction of a symmetric spec is its row
    direction. The claim is checked: the compiler evaluates the spec on
    random small metadata and rejects it with a counterexample
    (docs/descriptor.md, "Column direction").

    ```mlir
    cmask.spec @clear attributes {symmetric} { ... }
    ```

    ```mlir
    cmask.spec @document {
      cmask.metadata @docs : offsets
      cmask.region @all guard {
        %t = cmask.constant true
        cmask.yield %t : i1
      } rule {
        %i = cmask.var i
        %j = cmask.var j
        %si = cmask.seg @docs(%i)
        %sj = cmask.seg @docs(%j)
        %v = cmask.cmp eq, %sj, %si
        cmask.yield %v : i1
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<I64Attr>:$num_slots,
                       UnitAttr:$symmetric);
  let regions = (region SizedRegion<1>:$body);
  // `$sym_name attr-dict-with-keyword $body`, parsed by hand (CMaskOps.cpp:
  // regions parsed into the OperationState).
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
  let extraClassDeclaration = [{
    /// The metadata declarations, in order.
    auto getMetadata() { return getBody().getOps<MetadataOp>(); }
    /// The regions, in order.
    auto getRegions() { return getBody().getOps<RegionOp>(); }
  }];
}

def CMask_MetadataOp : CMask_Op<"metadata", [
    Symbol, HasParent<"SpecOp">]> {
  let summary = "declares a named runtime metadata input and its role";
  let description = [{
    Declares a metadata input. The role says how it is supplied and used:

    * `scalar`: one integer for the whole batch, read with `cmask.meta`;
    * `per_sequence`: one integer per sequence, read with `cmask.lookup`
      (normally indexed by `b`);
    * `offsets`: per sequence, a non-decreasing list of segment boundaries
      relative to the sequence start, used through `cmask.seg`,
      `cmask.seg_start` and `cmask.seg_end`.

    ```mlir
    cmask.metadata @context : scalar
    cmask.metadata @num_targets : per_sequence
    cmask.metadata @docs : offsets
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, CMask_MetadataRole:$role);
  let assemblyFormat = "$sym_name `:` $role attr-dict";
}

def CMask_RegionOp : CMask_Op<"region", [
    IsolatedFromAbove, Symbol, HasParent<"SpecOp">, NoRegionArguments]> {
  let summary = "a group of query rows with a row guard and a visibility rule";
  let description = [{
    The `guard` region computes, for query row `i`, whether this region
    applies (it may not mention `j`). The `rule` region computes whether row
    `i` sees key `j`. Both end in `cmask.yield` of an `i1`.

    After `cmask-extract-intervals` the rule ends instead in `cmask.slots`:
    the row sees the union of its slots' intervals. After
    `cmask-canonicalize-slots` the region carries `num_slots` (K).

    Syntax: `cmask.region @name (attributes {...})? guard { ... } rule { ... }`.
    The guard and the rule are each their own scope of SSA names: a value
    of one region (or of another `cmask.region`) cannot be used in another.

    ```mlir
    cmask.region @history guard {
      %i = cmask.var i
      %c = cmask.meta @context
      %g = cmask.cmp ge, %i, %c
      cmask.yield %g : i1
    } rule {
      %i = cmask.var i
      %j = cmask.var j
      %v = cmask.cmp le, %j, %i
      cmask.yield %v : i1
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<I64Attr>:$num_slots);
  let regions = (region SizedRegion<1>:$guard, SizedRegion<1>:$rule);
  // `$sym_name attr-dict-with-keyword guard $guard rule $rule`, parsed by
  // hand (CMaskOps.cpp: each region its own name scope, parsed into the
  // OperationState).
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// True once the rule has been lowered to interval slots.
    bool hasSlots();
  }];
}

def CMask_YieldOp : CMask_Op<"yield", [
    Pure, Terminator, ReturnLike, ParentOneOf<["RegionOp", "AnyOp"]>]> {
  let summary = "yields the boolean of a guard, a rule or a union body";
  let description = [{
    ```mlir
    cmask.yield %v : i1
    ```
  }];
  let arguments = (ins I1:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Variables and constants
//===----------------------------------------------------------------------===//

def CMask_VarOp : CMask_Op<"var", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a built-in variable: i, j, b, q_len or k_len";
  let description = [{
    `i` is the query row and `j` the key column, both relative to the start
    of their sequence; `b` is the sequence index; `q_len` and `k_len` are
    this sequence's query and key lengths. `j` may appear only in a rule,
    never in a guard.

    ```mlir
    %i = cmask.var i
    %kl = cmask.var k_len
    ```
  }];
  let arguments = (ins CMask_Builtin:$kind);
  let results = (outs I64:$result);
  let assemblyFormat = "$kind attr-dict";
  let hasVerifier = 1;
}

def CMask_ConstantOp : CMask_Op<"constant", [
    ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "an integer (i64) or boolean (i1) constant";
  let description = [{
    ```mlir
    %c4 = cmask.constant 4 : i64
    %t = cmask.constant true
    ```
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs AnyTypeOf<[I1, I64]>:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Integer arithmetic
//===----------------------------------------------------------------------===//

class CMask_BinaryIntOp<string mnemonic, string summaryText,
                        string example, list<Trait> traits = []>
    : CMask_Op<mnemonic, !listconcat([Pure], traits)> {
  let summary = summaryText;
  let description = "```mlir\n" # example # "\n```";
  let arguments = (ins I64:$lhs, I64:$rhs);
  let results = (outs I64:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict";
}

def CMask_AddOp : CMask_BinaryIntOp<"add", "integer addition",
    "%r = cmask.add %a, %b", [Commutative]>;
def CMask_SubOp : CMask_BinaryIntOp<"sub", "integer subtraction",
    "%r = cmask.sub %a, %b">;
def CMask_MinOp : CMask_BinaryIntOp<"min", "integer minimum",
    "%r = cmask.min %a, %b", [Commutative]>;
def CMask_MaxOp : CMask_BinaryIntOp<"max", "integer maximum",
    "%r = cmask.max %a, %b", [Commutative]>;

def CMask_MulOp : CMask_BinaryIntOp<"mul", "integer multiplication",
    "%r = cmask.mul %a, %b", [Commutative]> {
  let description = [{
    Integer product. In a rule, a factor that depends on `j` may only be
    multiplied by a constant (a literal or an expression of literals and
    union variables): `j * j` and `j * metadata` cannot be isolated.

    ```mlir
    %two_j = cmask.mul %c2, %j
    ```
  }];
  let hasVerifier = 1;
}

def CMask_FloorDivOp : CMask_BinaryIntOp<"floordiv",
    "integer division rounding toward negative infinity",
    "%r = cmask.floordiv %a, %b"> {
  let description = [{
    `lhs floordiv rhs`, rounding toward negative infinity as Python's `//`.
    A divisor that is zero at run time gives 0. A dividend that depends on
    `j` needs a positive constant divisor: `j floordiv C cmp e` is rewritten
    exactly into bounds on `j`.

    ```mlir
    %blk = cmask.floordiv %j, %c64
    ```
  }];
  let hasVerifier = 1;
}

def CMask_ModOp : CMask_BinaryIntOp<"mod",
    "integer remainder with the sign of the divisor",
    "%r = cmask.mod %a, %b"> {
  let description = [{
    `lhs mod rhs` as Python's `%` (the result has the sign of the divisor).
    A divisor that is zero at run time gives 0. `j mod C` cannot be isolated
    and is rejected.

    ```mlir
    %x = cmask.mod %p, %w
    ```
  }];
  let hasVerifier = 1;
}

def CMask_IsqrtOp : CMask_Op<"isqrt", [Pure]> {
  let summary = "integer square root (floor); 0 for negative operands";
  let description = [{
    `isqrt(x)` is the largest `s >= 0` with `s * s <= x`, and 0 when
    `x < 0`. It may not depend on `j`.

    ```mlir
    %s = cmask.isqrt %x
    ```
  }];
  let arguments = (ins I64:$operand);
  let results = (outs I64:$result);
  let assemblyFormat = "$operand attr-dict";
  let hasVerifier = 1;
}

def CMask_SelectOp : CMask_Op<"select", [Pure]> {
  let summary = "integer choice: cond ? a : b";
  let description = [{
    Picks `true_value` when `cond` holds, else `false_value`. None of its
    operands may depend on `j` (write the two cases with `cmask.or`).

    ```mlir
    %r = cmask.select %c, %a, %b
    ```
  }];
  let arguments = (ins I1:$cond, I64:$true_value, I64:$false_value);
  let results = (outs I64:$result);
  let assemblyFormat = "$cond `,` $true_value `,` $false_value attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Predicates
//===----------------------------------------------------------------------===//

def CMask_CmpOp : CMask_Op<"cmp", [Pure]> {
  let summary = "compares two integers";
  let description = [{
    An atom of a rule. An atom that mentions `j` must rearrange to
    `j <cmp> e` with `e` free of `j`; the compiler does it exactly.

    ```mlir
    %v = cmask.cmp le, %j, %i
    ```
  }];
  let arguments = (ins CMask_CmpPredicate:$predicate, I64:$lhs, I64:$rhs);
  let results = (outs I1:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict";
}

def CMask_AndOp : CMask_Op<"and", [Pure, Commutative]> {
  let summary = "conjunction of one or more booleans";
  let description = [{
    ```mlir
    %v = cmask.and %a, %b, %c
    ```
  }];
  let arguments = (ins Variadic<I1>:$operands);
  let results = (outs I1:$result);
  let assemblyFormat = "$operands attr-dict";
  let hasVerifier = 1;
}

def CMask_OrOp : CMask_Op<"or", [Pure, Commutative]> {
  let summary = "disjunction of one or more booleans";
  let description = [{
    ```mlir
    %v = cmask.or %a, %b
    ```
  }];
  let arguments = (ins Variadic<I1>:$operands);
  let results = (outs I1:$result);
  let assemblyFormat = "$operands attr-dict";
  let hasVerifier = 1;
}

def CMask_NotOp : CMask_Op<"not", [Pure]> {
  let summary = "boolean negation";
  let description = [{
    ```mlir
    %v = cmask.not %a
    ```
  }];
  let arguments = (ins I1:$operand);
  let results = (outs I1:$result);
  let assemblyFormat = "$operand attr-dict";
}

def CMask_AnyOp : CMask_Op<"any", [SingleBlock, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "bounded union: true if the body holds for some d in [lo, hi]";
  let description = [{
    A bounded union over an integer `d` with static inclusive bounds. The
    compiler unrolls it: in each copy `d` is a constant, so `d * d` or
    `isqrt(r * r - d * d)` are allowed and `j * d` is a constant multiple
    of `j`. The bounds must be non-empty and span at most 1024 values.

    ```mlir
    %v = cmask.any %d in [-16, 16] {
      %dd = cmask.mul %d, %d
      %ok = cmask.cmp le, %dd, %rr
      cmask.yield %ok : i1
    }
    ```
  }];
  let arguments = (ins I64Attr:$lower, I64Attr:$upper);
  let results = (outs I1:$result);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The union variable `d`.
    ::mlir::BlockArgument getInductionVar() {
      return getBody().front().getArgument(0);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Metadata access
//===----------------------------------------------------------------------===//

class CMask_MetadataAccessOp<string mnemonic, string role,
                             list<Trait> traits = []>
    : CMask_Op<mnemonic, !listconcat([Pure,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>], traits)> {
  let results = (outs I64:$result);
  let extraClassDeclaration = [{
    static constexpr ::mlir::cmask::MetadataRole kRequiredRole =
        ::mlir::cmask::MetadataRole::}] # role # [{;
  }];
}

def CMask_MetaOp : CMask_MetadataAccessOp<"meta", "scalar", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "reads a scalar metadata input";
  let description = [{
    ```mlir
    %c = cmask.meta @context
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$metadata);
  let assemblyFormat = "$metadata attr-dict";
}

def CMask_LookupOp : CMask_MetadataAccessOp<"lookup", "per_sequence"> {
  let summary = "reads a per-sequence metadata value";
  let description = [{
    Reads entry `index` of a per-sequence metadata array, normally at the
    sequence index `b`. An index outside the array gives 0. The index may
    not depend on `j`.

    ```mlir
    %b = cmask.var b
    %nt = cmask.lookup @num_targets[%b]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$metadata, I64:$index);
  let assemblyFormat = "$metadata `[` $index `]` attr-dict";
  let hasVerifier = 1;
}

def CMask_SegOp : CMask_MetadataAccessOp<"seg", "offsets"> {
  let summary = "segment index of a position in this sequence's offsets";
  let description = [{
    With this sequence's boundaries `o_0 <= ... <= o_{n-1}`, the segment
    index of position `p` is the number of boundaries `<= p`: segment 0 is
    `[0, o_0)`, segment `s` is `[o_{s-1}, o_s)`, segment `n` is
    `[o_{n-1}, L)` with `L = max(q_len, k_len)`. Segment indices are
    monotone in `p`, so `seg(j) == seg(i)` is exactly
    `seg_start(seg(i)) <= j < seg_end(seg(i))`. The position must be `j`
    itself or free of `j`.

    ```mlir
    %si = cmask.seg @docs(%i)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$metadata, I64:$position);
  let assemblyFormat = "$metadata `(` $position `)` attr-dict";
  let hasVerifier = 1;
}

def CMask_SegStartOp : CMask_MetadataAccessOp<"seg_start", "offsets"> {
  let summary = "first position of a segment";
  let description = [{
    `seg_start(s)` is `o_{s-1}`, with `o_{k} = 0` for `k < 0` and
    `o_k = L = max(q_len, k_len)` for `k >= n`. It may not depend on `j`.

    ```mlir
    %lo = cmask.seg_start @docs(%si)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$metadata, I64:$segment);
  let assemblyFormat = "$metadata `(` $segment `)` attr-dict";
  let hasVerifier = 1;
}

def CMask_SegEndOp : CMask_MetadataAccessOp<"seg_end", "offsets"> {
  let summary = "one past the last position of a segment";
  let description = [{
    `seg_end(s)` is `o_s` with the same extension as `cmask.seg_start`, so
    that `seg_end(s) == seg_start(s + 1)`. It may not depend on `j`.

    ```mlir
    %hi = cmask.seg_end @docs(%si)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$metadata, I64:$segment);
  let assemblyFormat = "$metadata `(` $segment `)` attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Interval form
//===----------------------------------------------------------------------===//

def CMask_SlotOp : CMask_Op<"slot", [Pure]> {
  let summary = "a visible-key interval [lo, hi) guarded by a row condition";
  let description = [{
    Produced by `cmask-extract-intervals`: when `cond` holds for the row,
    the row sees keys `j` with `lo <= j < hi`, the endpoints clamped to
    `[0, k_len]`. A false condition or `lo >= hi` is an empty slot. None of
    the operands may depend on `j`.

    ```mlir
    %s = cmask.slot [%lo, %hi) if %cond
    ```
  }];
  let arguments = (ins I64:$lo, I64:$hi, I1:$cond);
  let results = (outs CMask_SlotType:$result);
  let assemblyFormat = "` ` `[` $lo `,` $hi `)` `if` $cond attr-dict";
  let builders = [OpBuilder<(ins "::mlir::Value":$lo, "::mlir::Value":$hi,
                                 "::mlir::Value":$cond), [{
    build($_builder, $_state, SlotType::get($_builder.getContext()), lo, hi,
          cond);
  }]>];
  let hasVerifier = 1;
}

def CMask_SlotsOp : CMask_Op<"slots", [
    Pure, Terminator, HasParent<"RegionOp">]> {
  let summary = "terminates a rule in interval form: the row's slots";
  let description = [{
    The rule's visible keys are the union of these slots, in order. A rule
    with no slots sees nothing.

    ```mlir
    cmask.slots %s0, %s1
    ```
  }];
  let arguments = (ins Variadic<CMask_SlotType>:$slots);
  let assemblyFormat = "($slots^)? attr-dict";
}

#endif // CMASK_DIALECT_CMASK_IR_CMASKOPS_TD
