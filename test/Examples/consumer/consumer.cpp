//===- consumer.cpp - A tool that embeds cmask ----------------------------===//
//
// Registers the cmask dialect through its C API handle, the passes through
// the C++ hook, parses a MaskSpec, runs the pipeline by its registered name
// and prints K per spec.
//
//===----------------------------------------------------------------------===//

#include "cmask-c/Dialect/CMask.h"
#include "cmask/InitCMask.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: cmask-consumer SPEC.mlir\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  // C API: the dialect handle's hooks insert the dialect.
  MlirDialectHandle handle = mlirGetDialectHandle__cmask__();
  auto *hooks = static_cast<const MlirDialectRegistrationHooks *>(handle.ptr);
  hooks->insertHook(wrap(&registry));
  mlirRegisterCMaskPasses();

  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::parsePassPipeline("cmask-lower-to-intervals", pm)) ||
      mlir::failed(pm.run(*module)))
    return 1;
  for (auto spec : module->getOps<mlir::cmask::SpecOp>())
    llvm::outs() << "spec @" << spec.getSymName()
                 << ": K = " << spec.getNumSlots().value_or(0) << "\n";
  return 0;
}
