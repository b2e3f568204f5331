//===- cmask-translate.cpp - cmask translations ---------------------------===//
//
// Translations out of the cmask dialect: the JSON evaluators of a MaskSpec
// on concrete metadata (docs/metadata-json.md), the preprocess as PTX, and
// the artifact directory the runtime loads (docs/artifact.md).
//
//===----------------------------------------------------------------------===//

#include "cmask/InitCMask.h"
#include "cmask/Target/Artifact.h"
#include "cmask/Target/Evaluator.h"
#include "cmask/Tools/ToolArgs.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  std::vector<char *> args = mlir::cmask::withQuietDiagnostics(argc, argv);
  argc = static_cast<int>(args.size());
  argv = args.data();
  // The artifact is a directory (-o DIR), which mlir-translate's single
  // output file cannot be: it has its own driver.
  for (int k = 1; k < argc; ++k)
    if (llvm::StringRef(argv[k]).ends_with("-cmask-to-artifact"))
      return mlir::cmask::artifactMain(argc, argv);
  mlir::cmask::registerCMaskPassesAndPipelines();
  mlir::cmask::registerCMaskEvaluatorTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "cmask translation driver"));
}
