//===- MetadataFile.h - The metadata files of the cmask tools ---*- C++ -*-===//
//
// The JSON metadata files that `cmask-translate` evaluates a spec on
// (docs/metadata-json.md): one batch, or an array of batches, checked
// against the spec's metadata declarations. A file is read defensively:
// nesting is bounded (the reader is iterative, not recursive), duplicate
// keys and numbers that are not integers are errors, every error carries
// the line and column of the field it is about, and the sizes of the
// batches are bounded by what the caller will do with them (MetadataLimits).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_METADATAFILE_H
#define CMASK_TARGET_METADATAFILE_H

#include "cmask/Dialect/CMask/IR/CMaskOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::cmask {

/// The concrete metadata of one batch.
struct BatchMetadata {
  struct Sequence {
    int64_t qLen = 0, kLen = 0;
    /// The window (docs/descriptor.md, "Windows"): the present query rows
    /// and keys [begin, end) of the whole sequence; none: all of them.
    std::optional<std::pair<int64_t, int64_t>> qWindow, kWindow;
    int64_t presentQ() const {
      return qWindow ? qWindow->second - qWindow->first : qLen;
    }
    int64_t presentK() const {
      return kWindow ? kWindow->second - kWindow->first : kLen;
    }
  };
  std::vector<Sequence> sequences;
  llvm::StringMap<int64_t> scalars;
  llvm::StringMap<std::vector<int64_t>> perSequence;
  llvm::StringMap<std::vector<std::vector<int64_t>>> offsets;
};

/// A line and column of a metadata file (1-based; 0 when there is none,
/// e.g. a file that cannot be read).
struct FilePosition {
  unsigned line = 0, column = 0;
};

/// Bounds on the batches of a file, for tools whose work or output grows
/// with them (docs/metadata-json.md, Limits); 0 means unbounded.
struct MetadataLimits {
  int64_t maxRows = 0;     ///< query rows of a batch, summed over its sequences
  int64_t maxKeys = 0;     ///< keys of a batch, summed over its sequences
  int64_t maxElements = 0; ///< q_len * k_len, summed over the sequences
  /// What the bounds are for, in their messages (e.g. "the dense evaluator").
  std::string what = "cmask-translate";
  /// Whether sequences may have windows (q_window, k_window): the tools
  /// that read them (--cmask-to-descriptor-json).
  bool windows = false;
};

/// The most deeply nested arrays and objects a metadata file may hold (a
/// batch array of offsets lists needs 5).
inline constexpr unsigned kMaxMetadataNesting = 64;

/// What is wrong with a metadata file, and where: the message names the
/// field (`sequences[0].q_len: ...`, prefixed with `batch N: ` in an array
/// of batches).
class MetadataFileError : public llvm::ErrorInfo<MetadataFileError> {
public:
  static char ID;
  MetadataFileError(std::string message, FilePosition position)
      : message(std::move(message)), position(position) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
  const std::string &getMessage() const { return message; }
  FilePosition getPosition() const { return position; }

private:
  std::string message;
  FilePosition position;
};

/// The batches of a metadata file, with the position of each batch object.
struct MetadataFile {
  std::vector<BatchMetadata> batches;
  std::vector<FilePosition> positions;
  /// The file held an array of batches (not one batch object).
  bool isArray = false;
};

/// Reads the metadata file `text` for `spec`; errors are MetadataFileErrors.
llvm::Expected<MetadataFile>
parseMetadataText(llvm::StringRef text, SpecOp spec,
                  const MetadataLimits &limits = {});

/// parseMetadataText on the file at `path`.
llvm::Expected<MetadataFile>
readMetadataFile(llvm::StringRef path, SpecOp spec,
                 const MetadataLimits &limits = {});

} // namespace mlir::cmask

#endif // CMASK_TARGET_METADATAFILE_H
