//===- cmask-translate.cpp - cmask translations ---------------------------===//
//
// Translations out of the cmask dialect: the JSON evaluators of a MaskSpec
// on concrete metadata (docs/metadata-json.md).
//
//===----------------------------------------------------------------------===//

#include "cmask/InitCMask.h"
#include "cmask/Target/Evaluator.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::cmask::registerCMaskPassesAndPipelines();
  mlir::cmask::registerCMaskEvaluatorTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "cmask translation driver"));
}
