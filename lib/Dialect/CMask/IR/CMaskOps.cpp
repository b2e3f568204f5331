//===- CMaskOps.cpp - cmask operations ------------------------------------===//
//
// Verifiers of the cmask ops. Every misuse a user can write gets a located
// diagnostic that says what is wrong and what to write instead; in
// particular every construction in which `j` cannot be isolated into
// bounds `j >= e` / `j < e` is rejected where it is written.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cmask;

#include "cmask/Dialect/CMask/IR/CMaskEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// True if `value` is computed from `j`.
static bool dependsOnJ(Value value) {
  llvm::SmallVector<Value, 8> work{value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (auto var = dyn_cast<VarOp>(def); var && var.getKind() == Builtin::j)
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// True if `value` is a compile-time constant once unions are unrolled: it
/// is built only from literals and union variables.
static bool isStatic(Value value) {
  llvm::SmallVector<Value, 8> work{value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def) {
      if (!isa<AnyOp>(cast<BlockArgument>(v).getOwner()->getParentOp()))
        return false;
      continue;
    }
    if (!seen.insert(def).second)
      continue;
    if (isa<VarOp, MetaOp, LookupOp, SegOp, SegStartOp, SegEndOp>(def))
      return false;
    llvm::append_range(work, def->getOperands());
  }
  return true;
}

/// The integer value of a literal operand, if it is one.
static std::optional<int64_t> literal(Value value) {
  APInt v;
  if (matchPattern(value, m_ConstantInt(&v)))
    return v.getSExtValue();
  return std::nullopt;
}

/// The cmask.region enclosing `op`, and whether `op` is in its guard.
static std::pair<RegionOp, bool> enclosingRegion(Operation *op) {
  for (Region *region = op->getParentRegion(); region;
       region = region->getParentRegion()) {
    if (auto r = dyn_cast<RegionOp>(region->getParentOp()))
      return {r, region == &r.getGuard()};
  }
  return {RegionOp(), false};
}

static constexpr llvm::StringLiteral kIsolate = "cannot isolate j: ";

/// Literals (and union bounds) are 32-bit, like metadata.
static constexpr int64_t kMinLiteral = INT32_MIN, kMaxLiteral = INT32_MAX;

//===----------------------------------------------------------------------===//
// Parsing the ops with regions
//===----------------------------------------------------------------------===//
//
// cmask.spec and cmask.region parse their regions straight into the
// OperationState. ODS's declarative format parses them into local
// `std::unique_ptr<Region>`s instead, which MLIR's parser does not clean up
// when a later part of the op fails to parse: a forward reference that an
// earlier op resolved to a value in such a region is left pointing at freed
// memory (heap corruption on a truncated spec; the same happens upstream,
// e.g. with `scf.index_switch`, whose case regions are parsed the same way).
// With the regions in the OperationState, the parser drops those uses
// before it deletes the regions. Each region of a cmask.region is also its
// own name scope, so a rule cannot refer to values of another region at
// all: such a use is reported where the region ends.

/// `@name attributes {...}?`: the symbol name (into the op's properties),
/// then the optional attributes, checked as ODS checks them.
template <typename OpT>
static ParseResult parseNameAndAttributes(OpAsmParser &parser,
                                          OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name))
    return failure();
  result.getOrAddProperties<typename OpT::Properties>().sym_name = name;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  // The parser's errors name the op ("custom op 'cmask.spec' ...").
  auto emitError = [&]() { return parser.emitError(loc); };
  if (result.attributes.get("sym_name"))
    return emitError()
           << "takes its name before the attributes, not among them";
  return OpT::verifyInherentAttrs(result.name, result.attributes, emitError);
}

/// Prints what parseNameAndAttributes parses; `elided` attributes are not
/// printed (beside the name).
static void printNameAndAttributes(OpAsmPrinter &p, Operation *op,
                                   StringAttr name,
                                   llvm::ArrayRef<llvm::StringRef> elided) {
  p << ' ';
  p.printSymbolName(name.getValue());
  llvm::SmallVector<llvm::StringRef, 2> names{"sym_name"};
  names.append(elided.begin(), elided.end());
  p.printOptionalAttrDictWithKeyword(op->getAttrs(), names);
}

//===----------------------------------------------------------------------===//
// SpecOp
//===----------------------------------------------------------------------===//

ParseResult SpecOp::parse(OpAsmParser &parser, OperationState &result) {
  if (parseNameAndAttributes<SpecOp>(parser, result))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, /*arguments=*/{}, /*enableNameShadowing=*/true))
    return failure();
  if (body->empty())
    body->emplaceBlock();
  return success();
}

void SpecOp::print(OpAsmPrinter &p) {
  // `symmetric` is printed in the dictionary only when set.
  printNameAndAttributes(p, *this, getSymNameAttr(), {});
  p << ' ';
  p.printRegion(getBody());
}

void SpecOp::build(OpBuilder &builder, OperationState &state,
                   llvm::StringRef name) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  Region *body = state.addRegion();
  body->emplaceBlock();
}

LogicalResult SpecOp::verify() {
  for (Operation &op : getBody().front())
    if (!isa<MetadataOp, RegionOp>(op))
      return op.emitOpError()
             << "cannot appear directly in a cmask.spec; a spec holds only "
                "cmask.metadata and cmask.region ops";
  if (getRegions().empty())
    return emitOpError() << "has no region; add at least one cmask.region "
                            "saying which keys its rows see";
  return success();
}

//===----------------------------------------------------------------------===//
// RegionOp
//===----------------------------------------------------------------------===//

ParseResult RegionOp::parse(OpAsmParser &parser, OperationState &result) {
  if (parseNameAndAttributes<RegionOp>(parser, result))
    return failure();
  for (llvm::StringRef keyword : {"guard", "rule"})
    if (parser.parseKeyword(keyword) ||
        parser.parseRegion(*result.addRegion(), /*arguments=*/{},
                           /*enableNameShadowing=*/true))
      return failure();
  return success();
}

void RegionOp::print(OpAsmPrinter &p) {
  printNameAndAttributes(p, *this, getSymNameAttr(), {});
  p << " guard ";
  p.printRegion(getGuard());
  p << " rule ";
  p.printRegion(getRule());
}

bool RegionOp::hasSlots() {
  return isa<SlotsOp>(getRule().front().getTerminator());
}

LogicalResult RegionOp::verifyRegions() {
  for (Region *body : {&getGuard(), &getRule()}) {
    WalkResult foreign = body->walk([&](Operation *op) {
      if (isa<CMaskDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError() << "cannot appear in a "
                        << (body == &getGuard() ? "guard" : "rule")
                        << "; guards and rules are written with cmask ops only";
      return WalkResult::interrupt();
    });
    if (foreign.wasInterrupted())
      return failure();
  }
  Operation *guardEnd = getGuard().front().getTerminator();
  if (!isa<YieldOp>(guardEnd))
    return guardEnd->emitOpError()
           << "cannot end a guard; a guard ends in `cmask.yield %v : i1`";
  return success();
}

//===----------------------------------------------------------------------===//
// VarOp, ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult VarOp::verify() {
  auto [region, inGuard] = enclosingRegion(*this);
  if (!region)
    return emitOpError() << "must be inside a cmask.region";
  if (getKind() == Builtin::j && inGuard)
    return emitOpError()
           << "`j` cannot appear in a row guard: a guard selects query rows "
              "and may use only i, b, q_len, k_len and metadata; move the "
              "condition on j into the rule";
  return success();
}

void VarOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), stringifyBuiltin(getKind()));
}

LogicalResult ConstantOp::verify() {
  Type type = getValue().getType();
  if (!type.isInteger(1) && !type.isInteger(64))
    return emitOpError() << "must be an i64 or i1 literal, got " << type;
  if (!isa<IntegerAttr>(getValue()))
    return emitOpError() << "must be an integer literal";
  if (type.isInteger(64)) {
    int64_t v = cast<IntegerAttr>(getValue()).getInt();
    if (v < kMinLiteral || v > kMaxLiteral)
      return emitOpError()
             << "literal " << v << " is outside the 32-bit range ["
             << kMinLiteral << ", " << kMaxLiteral
             << "]; rules compute in 64 bits on 32-bit metadata and literals, "
                "so that they cannot overflow";
  }
  return success();
}

void ConstantOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  APInt v = cast<IntegerAttr>(getValue()).getValue();
  if (getType().isInteger(1)) {
    setNameFn(getResult(), v.getBoolValue() ? "true" : "false");
    return;
  }
  int64_t n = v.getSExtValue();
  setNameFn(getResult(), n < 0 ? "c_" + std::to_string(-(n + 1) + 1ULL)
                               : "c" + std::to_string(n));
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

LogicalResult MulOp::verify() {
  bool lhsJ = dependsOnJ(getLhs()), rhsJ = dependsOnJ(getRhs());
  if (lhsJ && rhsJ)
    return emitOpError() << kIsolate
                         << "both factors depend on j; a product like `j * j` "
                            "is not linear in j";
  if ((lhsJ && !isStatic(getRhs())) || (rhsJ && !isStatic(getLhs())))
    return emitOpError()
           << kIsolate
           << "j is multiplied by a factor that is not a constant (it "
              "depends on metadata or a variable); only constant multiples "
              "of j are allowed";
  return success();
}

/// Common checks of floordiv and mod.
static LogicalResult verifyDivision(Operation *op, Value lhs, Value rhs,
                                    bool allowJDividend) {
  if (auto d = literal(rhs); d && *d == 0)
    return op->emitOpError() << "divides by zero";
  if (dependsOnJ(rhs))
    return op->emitOpError() << kIsolate << "the divisor depends on j";
  if (!dependsOnJ(lhs))
    return success();
  if (!allowJDividend)
    return op->emitOpError()
           << kIsolate
           << "`mod` of a j-dependent value selects keys periodically, not "
              "a bounded number of intervals";
  auto d = literal(rhs);
  if (!isStatic(rhs) || (d && *d <= 0))
    return op->emitOpError()
           << kIsolate
           << "a j-dependent dividend needs a positive constant divisor";
  return success();
}

LogicalResult FloorDivOp::verify() {
  return verifyDivision(*this, getLhs(), getRhs(), /*allowJDividend=*/true);
}

LogicalResult ModOp::verify() {
  return verifyDivision(*this, getLhs(), getRhs(), /*allowJDividend=*/false);
}

LogicalResult IsqrtOp::verify() {
  if (dependsOnJ(getOperand()))
    return emitOpError() << kIsolate
                         << "the square root of a j-dependent value is not "
                            "linear in j";
  return success();
}

LogicalResult SelectOp::verify() {
  if (dependsOnJ(getCond()) || dependsOnJ(getTrueValue()) ||
      dependsOnJ(getFalseValue()))
    return emitOpError() << kIsolate
                         << "a select may not depend on j; write the two "
                            "cases as `(c and x) or (not c and y)`";
  return success();
}

//===----------------------------------------------------------------------===//
// Boolean ops
//===----------------------------------------------------------------------===//

LogicalResult AndOp::verify() {
  if (getOperands().empty())
    return emitOpError() << "needs at least one operand";
  return success();
}

LogicalResult OrOp::verify() {
  if (getOperands().empty())
    return emitOpError() << "needs at least one operand";
  return success();
}

static constexpr int64_t kMaxUnionSize = 1024;

LogicalResult AnyOp::verify() {
  int64_t lo = getLowerAttr().getInt(), hi = getUpperAttr().getInt();
  if (lo < kMinLiteral || hi > kMaxLiteral)
    return emitOpError() << "bounds [" << lo << ", " << hi
                         << "] are outside the 32-bit range";
  if (lo > hi)
    return emitOpError() << "is an empty union: its lower bound " << lo
                         << " is greater than its upper bound " << hi;
  if (static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) >=
      static_cast<uint64_t>(kMaxUnionSize))
    return emitOpError() << "unions over more than " << kMaxUnionSize
                         << " values are not supported (bounds [" << lo << ", "
                         << hi << "])";
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 ||
      !body.getArgument(0).getType().isInteger(64))
    return emitOpError() << "body must take the union variable as one i64 "
                            "argument";
  return success();
}

void AnyOp::getAsmBlockArgumentNames(Region &region,
                                     OpAsmSetValueNameFn setNameFn) {
  setNameFn(getInductionVar(), "d");
}

ParseResult AnyOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::Argument var;
  int64_t lo = 0, hi = 0;
  Builder &b = parser.getBuilder();
  if (parser.parseArgument(var))
    return failure();
  llvm::SMLoc boundsLoc = parser.getCurrentLocation();
  if (parser.parseOptionalKeyword("in") || parser.parseOptionalLSquare())
    return parser.emitError(boundsLoc)
           << "a bounded union needs static inclusive bounds: write "
              "`cmask.any %d in [lo, hi] { ... }`";
  if (parser.parseInteger(lo) || parser.parseComma() ||
      parser.parseInteger(hi) || parser.parseRSquare() ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  var.type = b.getI64Type();
  result.addAttribute(getLowerAttrName(result.name), b.getI64IntegerAttr(lo));
  result.addAttribute(getUpperAttrName(result.name), b.getI64IntegerAttr(hi));
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, {var}))
    return failure();
  result.addTypes(b.getI1Type());
  return success();
}

void AnyOp::print(OpAsmPrinter &p) {
  p << " " << getInductionVar() << " in [" << getLowerAttr().getInt() << ", "
    << getUpperAttr().getInt() << "]";
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getLowerAttrName(), getUpperAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/true);
}

//===----------------------------------------------------------------------===//
// Metadata access
//===----------------------------------------------------------------------===//

template <typename OpT>
static LogicalResult verifyMetadataUse(OpT op, SymbolTableCollection &tables) {
  auto spec = op->template getParentOfType<SpecOp>();
  if (!spec)
    return op.emitOpError() << "must be inside a cmask.spec";
  FlatSymbolRefAttr name = op.getMetadataAttr();
  llvm::StringRef required = stringifyMetadataRole(OpT::kRequiredRole);
  Operation *decl = tables.lookupSymbolIn(spec, name);
  auto meta = dyn_cast_or_null<MetadataOp>(decl);
  if (!meta)
    return op.emitOpError() << "uses undeclared metadata " << name
                            << "; declare it in the spec with `cmask.metadata "
                            << name << " : " << required << "`";
  if (meta.getRole() != OpT::kRequiredRole)
    return op.emitOpError()
           << "needs " << required << " metadata, but " << name
           << " is declared as " << stringifyMetadataRole(meta.getRole());
  return success();
}

void MetaOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getMetadata());
}

LogicalResult MetaOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMetadataUse(*this, tables);
}
LogicalResult LookupOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMetadataUse(*this, tables);
}
LogicalResult SegOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMetadataUse(*this, tables);
}
LogicalResult SegStartOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMetadataUse(*this, tables);
}
LogicalResult SegEndOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMetadataUse(*this, tables);
}

LogicalResult LookupOp::verify() {
  if (dependsOnJ(getIndex()))
    return emitOpError() << kIsolate << "metadata array " << getMetadataAttr()
                         << " is indexed by a j-dependent value";
  return success();
}

LogicalResult SegOp::verify() {
  Value pos = getPosition();
  if (!dependsOnJ(pos))
    return success();
  auto var = pos.getDefiningOp<VarOp>();
  if (!var || var.getKind() != Builtin::j)
    return emitOpError() << kIsolate
                         << "the segment of a j-dependent position other than "
                            "j itself; compare seg(j) and shift the other side";
  return success();
}

LogicalResult SegStartOp::verify() {
  if (dependsOnJ(getSegment()))
    return emitOpError() << kIsolate
                         << "the start of a j-dependent segment; compare "
                            "seg(j) with a j-free segment index instead";
  return success();
}

LogicalResult SegEndOp::verify() {
  if (dependsOnJ(getSegment()))
    return emitOpError() << kIsolate
                         << "the end of a j-dependent segment; compare "
                            "seg(j) with a j-free segment index instead";
  return success();
}

//===----------------------------------------------------------------------===//
// Interval form
//===----------------------------------------------------------------------===//

LogicalResult SlotOp::verify() {
  if (dependsOnJ(getLo()) || dependsOnJ(getHi()) || dependsOnJ(getCond()))
    return emitOpError() << "endpoints and condition of a slot must not "
                            "depend on j";
  return success();
}

#define GET_OP_CLASSES
#include "cmask/Dialect/CMask/IR/CMaskOps.cpp.inc"
