//===- PreprocessStages.cpp - The preprocess as GPU stage kernels ---------===//
//
// Wraps the phases' item functions (RowPhase.cpp, CheckPhase.cpp,
// TilePhases.cpp) in the preprocess kernels: the phases grouped into seven
// stages run in one launch per argument-group bin, each block taking a
// ticket and waiting for the stage before (docs/descriptor.md, "Phases");
// then the whole GPU module to PTX.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"
#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

#include "Emitter.h"
#include "KernelSignature.h"
#include "PreprocessPhases.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::cmask;

/// The phases in launch order, grouped into stages of phases that do not
/// depend on each other (docs/descriptor.md, "Phases").
static const std::vector<std::vector<Phase>> kStages = {
    {Phase::Check, Phase::Rows, Phase::Seqs, Phase::EnvInit},
    {Phase::Env},
    {Phase::Tiles},
    {Phase::Pack},
    {Phase::Count},
    {Phase::Scan},
    {Phase::Fill}};

/// The host-wrapper / kernel name of a phase (its item function is
/// `<name>_item`).
static const std::string &phaseName(const PreprocessNames &names, Phase phase,
                                    int shape) {
  if (phase == Phase::Check)
    return names.check;
  if (phase == Phase::Rows)
    return names.rows;
  const PreprocessNames::Tiles &t = names.tiles[shape];
  switch (phase) {
  case Phase::Seqs:
    return t.seqs;
  case Phase::EnvInit:
    return t.envinit;
  case Phase::Env:
    return t.env;
  case Phase::Tiles:
    return t.tiles;
  case Phase::Pack:
    return t.pack;
  case Phase::Count:
    return t.count;
  case Phase::Scan:
    return t.scan;
  case Phase::Fill:
    return t.fill;
  default:
    llvm_unreachable("not a tile phase");
  }
}

/// At most the bytes of kernel parameters a value of `type` takes once
/// lowered: a memref<?xi32> is five 8-byte words; an i32 is counted as 8,
/// the padding it may need before the next 8-byte word included.
static int64_t paramBytes(Type type) {
  if (isa<MemRefType>(type))
    return 5 * 8;
  return 8;
}

/// Kernel parameters stay under CUDA's 4 KB limit (with room for alignment).
static constexpr int64_t kParamBudget = 4000;

/// Plans the preprocess kernels of `parts` (named after the first spec):
/// one kernel running the seven stages for every argument group (a
/// direction's row group, each of its tile shapes' tile group) while the
/// parameters stay under the budget; else the groups, in order (a
/// direction's row group before its tile groups), are packed into
/// successive kernels that each run every stage for their groups. A tile
/// phase then reads rows an earlier kernel built, and the phases of
/// different groups of one stage never depend on each other. `itemFn`
/// gives the item function of a phase. Fails (with `why`) when one group
/// alone passes the budget.
static FailureOr<LaunchPlan>
planStages(llvm::ArrayRef<PreprocessNames> parts, llvm::StringRef base,
           llvm::function_ref<func::FuncOp(const StageKernel::Item &)> itemFn,
           std::string &why) {
  // The groups in order, and the parameter bytes of each: its arguments
  // and the item count of each of its phases.
  std::vector<std::pair<int, int>> groups;
  for (int d = 0; d < static_cast<int>(parts.size()); ++d)
    for (int shape = -1; shape < static_cast<int>(parts[d].tiles.size());
         ++shape)
      groups.push_back({d, shape});
  auto phasesOf = [](const std::pair<int, int> &group) {
    int64_t n = 0;
    for (const std::vector<Phase> &stage : kStages)
      for (Phase phase : stage)
        n += ::cmask::abi::isRowPhase(phase) == (group.second < 0);
    return n;
  };
  auto bytesOf = [&](const std::pair<int, int> &group) {
    StageKernel::Item any{group.second < 0 ? Phase::Rows : Phase::Seqs,
                          group.first, group.second};
    int64_t bytes = 8 * phasesOf(group);
    for (Type t : itemFn(any).getFunctionType().getInputs().drop_front())
      bytes += paramBytes(t);
    return bytes;
  };
  constexpr int64_t kSyncBytes = 5 * 8; // a memref, as paramBytes counts it
  std::vector<std::vector<std::pair<int, int>>> bins;
  int64_t bytes = 0;
  for (const std::pair<int, int> &group : groups) {
    int64_t groupBytes = bytesOf(group);
    if (kSyncBytes + groupBytes > kParamBudget) {
      why = "the preprocess kernel's parameters of one argument group (" +
            std::to_string(groupBytes) +
            " bytes: its metadata) pass CUDA's 4 KB; declare fewer metadata "
            "inputs";
      return failure();
    }
    if (bins.empty() || bytes + groupBytes > kParamBudget) {
      bins.emplace_back();
      bytes = kSyncBytes;
    }
    bins.back().push_back(group);
    bytes += groupBytes;
  }
  LaunchPlan plan;
  for (const std::vector<std::pair<int, int>> &bin : bins) {
    StageKernel kernel;
    for (const std::vector<Phase> &stage : kStages) {
      ::cmask::abi::Stage items;
      for (Phase phase : stage)
        for (auto [d, shape] : bin)
          if (::cmask::abi::isRowPhase(phase) == (shape < 0))
            items.push_back({phase, d, shape});
      if (!items.empty())
        kernel.stages.push_back(std::move(items));
    }
    plan.push_back(std::move(kernel));
  }
  for (auto [k, kernel] : llvm::enumerate(plan)) {
    kernel.name = (base + "_preprocess").str();
    if (plan.size() > 1)
      kernel.name += std::to_string(k);
  }
  return plan;
}

/// One PTX statement for its side effect (a fence, a sleep), with a memory
/// clobber so that no load or store moves across it; `operands` ($0, ...)
/// as `constraints` says.
static void emitPTXStatement(OpBuilder &b, Location loc, llvm::StringRef code,
                             ValueRange operands = {},
                             llvm::StringRef constraints = "") {
  std::string clobbers = constraints.empty()
                             ? std::string("~{memory}")
                             : (constraints + ",~{memory}").str();
  LLVM::InlineAsmOp::create(b, loc, TypeRange{}, operands, code, clobbers,
                            /*has_side_effects=*/true,
                            /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

/// Waits until the i32 at `address` (a global address) reaches `need`
/// (unsigned): relaxed loads at gpu scope between sleeps growing from 32 ns
/// to 512 ns, then an acquire fence (the loads read L2; an atomic per poll
/// would contend with the counting it waits for).
static void emitWaitForCount(Emitter &e, Value address, Value need) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type();
  e.whileLoop(
      ValueRange{e.c32(32)}, TypeRange{i32},
      [&](llvm::SmallVector<Value> sleep) {
        Value count = LLVM::InlineAsmOp::create(
                          b, loc, i32, ValueRange{address},
                          "ld.relaxed.gpu.u32 $0, [$1];", "=r,l",
                          /*has_side_effects=*/true, /*is_align_stack=*/false,
                          LLVM::tailcallkind::TailCallKind::None,
                          LLVM::AsmDialectAttr(), ArrayAttr())
                          .getResult(0);
        return llvm::SmallVector<Value>{
            e.cmp(arith::CmpIPredicate::ult, count, need), sleep[0]};
      },
      [&](llvm::SmallVector<Value> sleep) {
        emitPTXStatement(b, loc, "nanosleep.u32 $0;", sleep[0], "r");
        return llvm::SmallVector<Value>{arith::MinUIOp::create(
            b, loc, e.add(sleep[0], sleep[0]), e.c32(512))};
      });
  emitPTXStatement(b, loc, "fence.acq_rel.gpu;");
}

/// Adds the preprocess kernel `kernel` (see StageKernel): its stages in one
/// launch, each block running the stage of its ticket after the stage
/// before has finished (abi::stageBlocks has the protocol).
static gpu::GPUFuncOp addStageKernel(
    OpBuilder &b, Location loc, const StageKernel &kernel,
    llvm::function_ref<func::FuncOp(const StageKernel::Item &)> itemFn) {
  std::vector<StageKernel::Item> phases =
      ::cmask::abi::stagePhases(kernel.stages);
  // Argument groups in order of first use, and where each starts.
  llvm::SmallVector<std::pair<int, int>> groups;
  llvm::SmallVector<Type> types(phases.size(), b.getIndexType());
  llvm::SmallVector<unsigned> groupStart, phaseGroup;
  for (const StageKernel::Item &item : phases) {
    std::pair<int, int> group{item.direction, item.shape};
    auto *it = llvm::find(groups, group);
    if (it == groups.end()) {
      groups.push_back(group);
      groupStart.push_back(types.size());
      auto inputs = itemFn(item).getFunctionType().getInputs().drop_front();
      types.append(inputs.begin(), inputs.end());
      it = groups.end() - 1;
    }
    phaseGroup.push_back(groupStart[it - groups.begin()]);
  }
  Type i32 = b.getI32Type();
  types.push_back(MemRefType::get({ShapedType::kDynamic}, i32)); // sync
  auto gpuFunc =
      gpu::GPUFuncOp::create(b, loc, kernel.name, b.getFunctionType(types, {}));
  gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Value ticketSlot = gpuFunc.addWorkgroupAttribution(
      MemRefType::get({1}, i32, MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(b.getContext(),
                                                 gpu::AddressSpace::Workgroup)),
      loc);
  OpBuilder::InsertionGuard guard(b);
  Block *body = &gpuFunc.getBody().front();
  b.setInsertionPointToStart(body);
  Emitter e(b, loc);
  Value sync = body->getArgument(types.size() - 1);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value threads = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
  Value zero = e.cIdx(0), one = e.cIdx(1);
  Value lead =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  auto atomicAdd = [&](Value word, int64_t value) {
    return memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                       e.c32(value), sync, ValueRange{word})
        .getResult();
  };
  // The ticket, through shared memory to the whole block.
  e.ifThen(lead, [&] {
    memref::StoreOp::create(b, loc, atomicAdd(zero, 1), ticketSlot,
                            ValueRange{zero});
  });
  gpu::BarrierOp::create(b, loc);
  Value ticket = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      memref::LoadOp::create(b, loc, ticketSlot, ValueRange{zero}));
  Value start = zero, previousBlocks;
  unsigned p = 0; // the first phase of the stage
  for (auto [s, stage] : llvm::enumerate(kernel.stages)) {
    Value items = zero;
    for (unsigned k = 0; k < stage.size(); ++k)
      items = e.add(items, body->getArgument(p + k));
    // abi::stageBlocks: at least one block, so that the next stage's wait
    // covers this stage's.
    Value blocks = arith::MaxUIOp::create(
        b, loc, one, arith::CeilDivUIOp::create(b, loc, items, threads));
    Value local = e.sub(ticket, start); // wraps for tickets before `start`
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, local, blocks), [&] {
      if (s > 0) {
        // Wait for the stage before: its finished blocks in sync[s]. The
        // runtime passes `sync` with offset 0 and stride 1
        // (KernelParams::buffer): word s is at the aligned pointer + 4s.
        Value need = e.fromIndex(previousBlocks, i32);
        e.ifThen(lead, [&] {
          Value base = arith::IndexCastOp::create(
              b, loc, b.getI64Type(),
              memref::ExtractAlignedPointerAsIndexOp::create(b, loc, sync));
          emitWaitForCount(e, e.add(base, e.c64(4 * static_cast<int64_t>(s))),
                           need);
        });
        gpu::BarrierOp::create(b, loc);
      }
      // if (id < n0) phase0(id) else { id -= n0; if (id < n1) ... }
      Value id = e.add(e.mul(local, threads), tid);
      {
        OpBuilder::InsertionGuard dispatch(b);
        for (unsigned k = 0; k < stage.size(); ++k) {
          Value count = body->getArgument(p + k);
          Value inRange = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ult, id, count);
          auto ifOp =
              scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/true);
          b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
          func::FuncOp fn = itemFn(stage[k]);
          llvm::SmallVector<Value> args = {id};
          unsigned n = fn.getFunctionType().getNumInputs() - 1;
          for (unsigned a = 0; a < n; ++a)
            args.push_back(body->getArgument(phaseGroup[p + k] + a));
          func::CallOp::create(b, loc, fn, args);
          b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
          id = arith::SubIOp::create(b, loc, id, count);
        }
      }
      // The block's items are done: count it finished (release).
      gpu::BarrierOp::create(b, loc);
      e.ifThen(lead, [&] {
        emitPTXStatement(b, loc, "fence.acq_rel.gpu;");
        atomicAdd(e.cIdx(1 + s), 1);
      });
    });
    p += stage.size();
    start = e.add(start, blocks);
    previousBlocks = blocks;
  }
  b.setInsertionPointToEnd(body);
  gpu::ReturnOp::create(b, loc);
  return gpuFunc;
}

FailureOr<LaunchPlan>
mlir::cmask::buildGPUPreprocess(llvm::ArrayRef<PreprocessPart> parts,
                                ModuleOp module) {
  assert(!parts.empty() && "nothing to build");
  SpecOp spec = parts.front().spec;
  llvm::SmallVector<PreprocessNames> names;
  for (const PreprocessPart &part : parts) {
    if (failed(buildPreprocess(part.spec, module, part.shapes,
                               PreprocessTarget::GPU)))
      return failure();
    names.push_back(getPreprocessNames(part.spec, part.shapes));
  }
  auto gpuModule =
      module.lookupSymbol<gpu::GPUModuleOp>(preprocess::kGPUModuleName);
  auto itemFn = [&](const StageKernel::Item &item) {
    return gpuModule.lookupSymbol<func::FuncOp>(
        phaseName(names[item.direction], item.phase, item.shape) + "_item");
  };
  std::string why;
  FailureOr<LaunchPlan> planned =
      planStages(names, ("cmask_" + spec.getSymName()).str(), itemFn, why);
  if (failed(planned))
    return spec.emitOpError() << why;
  LaunchPlan plan = std::move(*planned);
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc =
      NameLoc::get(StringAttr::get(module.getContext(), spec.getSymName()));
  for (const StageKernel &kernel : plan) {
    gpu::GPUFuncOp func = addStageKernel(b, loc, kernel, itemFn);
    // The signature is the item functions' groups; it must be the one the
    // kernel ABI lists (the manifest's, the runtime's).
    if (func.getArgumentTypes() !=
        ArrayRef<Type>(getABITypes(b, getStageKernelArgs(kernel, spec))))
      return func.emitOpError()
             << "internal error: the stage kernel's arguments differ from "
                "the kernel ABI's list (cmask_runtime/KernelABI.h)";
  }
  return plan;
}

FailureOr<CompiledPreprocess>
mlir::cmask::compilePreprocessToPTX(llvm::ArrayRef<PreprocessPart> parts,
                                    llvm::StringRef chip) {
  assert(!parts.empty() && "nothing to compile");
  SpecOp spec = parts.front().spec;
  DialectRegistry registry;
  registerGPULowering(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  CompiledPreprocess result;
  auto plan = buildGPUPreprocess(parts, *module);
  if (failed(plan))
    return failure();
  result.plan = std::move(*plan);

  auto ptx = lowerToPTX(*module, chip, spec.getLoc());
  if (failed(ptx))
    return failure();
  result.ptx = std::move(*ptx);
  return result;
}

LogicalResult mlir::cmask::lowerPreprocessToLLVM(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}
