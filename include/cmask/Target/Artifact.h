//===- Artifact.h - The artifact the runtime loads --------------*- C++ -*-===//

#ifndef CMASK_TARGET_ARTIFACT_H
#define CMASK_TARGET_ARTIFACT_H

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"

namespace mlir::cmask {

/// Compiles `spec` (rule form) and writes preprocess.ptx, preprocess.cubin
/// (when ptxas is found) and manifest.json into `dir`.
LogicalResult writeArtifact(SpecOp spec, llvm::StringRef dir,
                            llvm::ArrayRef<TileShape> shapes,
                            llvm::ArrayRef<TileShape> columnShapes,
                            llvm::StringRef arch, bool verbose);

/// `cmask-translate SPEC --cmask-to-artifact -o DIR [--arch=..]
/// [--tile-shapes=..]`: a directory output, which mlir-translate's file
/// output cannot express, so cmask-translate dispatches it here.
int artifactMain(int argc, char **argv);

} // namespace mlir::cmask

#endif // CMASK_TARGET_ARTIFACT_H
