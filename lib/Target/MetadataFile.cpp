//===- MetadataFile.cpp - The metadata files of the cmask tools -----------===//
//
// A metadata file is read in three steps:
//   1. JsonScanner checks the text without recursion: well-formed JSON,
//      valid UTF-8, nesting at most kMaxMetadataNesting deep, no duplicate
//      key in an object, integers only (`3.0` and `1e3` are not lengths);
//      each error at its line and column.
//   2. llvm::json parses the checked text into values (its recursion is now
//      bounded).
//   3. BatchReader checks the values against the spec's declarations and the
//      caller's limits. Its errors name a path into the document; a second
//      scan finds the line and column of that path.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/MetadataFile.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

using namespace mlir;
using namespace mlir::cmask;

char MetadataFileError::ID = 0;

void MetadataFileError::log(llvm::raw_ostream &os) const { os << message; }

std::error_code MetadataFileError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

static llvm::Error fileError(const llvm::Twine &message, FilePosition at) {
  return llvm::make_error<MetadataFileError>(message.str(), at);
}

//===----------------------------------------------------------------------===//
// JSON paths and the scanner
//===----------------------------------------------------------------------===//

namespace {
/// One step of a path into a JSON document: an object's key or an array's
/// index.
struct PathStep {
  std::string key;
  int64_t index = -1; ///< >= 0: an array element

  static PathStep at(int64_t i) { return {"", i}; }
  static PathStep member(llvm::StringRef k) { return {k.str(), -1}; }
  bool operator==(const PathStep &other) const {
    return index == other.index && key == other.key;
  }
};
using JsonPath = llvm::SmallVector<PathStep, 6>;

/// Checks a JSON text without recursion and reports every value (and every
/// object key) with its path and position to `visit`, which returns true
/// to stop the scan.
class JsonScanner {
public:
  using Visit =
      llvm::function_ref<bool(const JsonPath &, FilePosition, bool isKey)>;

  explicit JsonScanner(llvm::StringRef text) : text(text) {}

  llvm::Error scan(Visit visit);

private:
  struct Frame {
    bool object;
    /// After a key (object) or an element (array): a ',' or the end next.
    bool afterItem = false;
    /// After a ',': an item must follow.
    bool needItem = false;
    int64_t index = 0;
    llvm::StringSet<> keys;
  };

  FilePosition here() const {
    return {line, static_cast<unsigned>(pos - lineStart + 1)};
  }
  llvm::Error error(const llvm::Twine &message) const {
    return fileError("not valid JSON: " + message, here());
  }
  void skipSpace();
  bool done() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }
  llvm::Error scanString(std::string *decoded);
  llvm::Error scanNumber();
  llvm::Error scanWord();

  llvm::StringRef text;
  size_t pos = 0, lineStart = 0;
  unsigned line = 1;
};
} // namespace

void JsonScanner::skipSpace() {
  while (!done()) {
    char c = peek();
    if (c == '\n') {
      ++line;
      lineStart = pos + 1;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      return;
    }
    ++pos;
  }
}

llvm::Error JsonScanner::scanString(std::string *decoded) {
  ++pos; // the opening quote
  while (true) {
    if (done())
      return error("unterminated string");
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '"') {
      ++pos;
      return llvm::Error::success();
    }
    if (c < 0x20)
      return error("control character in a string (write it as an escape)");
    if (c != '\\') {
      if (decoded)
        decoded->push_back(static_cast<char>(c));
      ++pos;
      continue;
    }
    ++pos;
    if (done())
      return error("unterminated string");
    char e = peek();
    ++pos;
    static constexpr llvm::StringLiteral kSimple = "\"\\/bfnrt",
                                         kValue = "\"\\/\b\f\n\r\t";
    if (size_t k = kSimple.find(e); k != llvm::StringRef::npos) {
      if (decoded)
        decoded->push_back(kValue[k]);
      continue;
    }
    if (e != 'u')
      return error(llvm::Twine("invalid escape '\\") + llvm::Twine(e) + "'");
    auto hex4 = [&](uint32_t &out) -> bool {
      if (pos + 4 > text.size())
        return false;
      out = 0;
      for (int d = 0; d < 4; ++d) {
        char h = text[pos + d];
        unsigned v = llvm::isDigit(h)       ? h - '0'
                     : h >= 'a' && h <= 'f' ? h - 'a' + 10
                     : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                            : 16;
        if (v == 16)
          return false;
        out = out * 16 + v;
      }
      pos += 4;
      return true;
    };
    uint32_t cp;
    if (!hex4(cp))
      return error("\\u must be followed by four hex digits");
    if (cp >= 0xD800 && cp < 0xDC00) {
      // A high surrogate: its low half must follow.
      uint32_t low;
      if (pos + 2 > text.size() || text[pos] != '\\' || text[pos + 1] != 'u' ||
          (pos += 2, !hex4(low)) || low < 0xDC00 || low >= 0xE000)
        return error("unpaired UTF-16 surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      return error("unpaired UTF-16 surrogate in a \\u escape");
    }
    if (decoded) {
      char utf8[UNI_MAX_UTF8_BYTES_PER_CODE_POINT];
      char *end = utf8;
      llvm::ConvertCodePointToUTF8(cp, end);
      decoded->append(utf8, end);
    }
  }
}

llvm::Error JsonScanner::scanNumber() {
  size_t start = pos;
  FilePosition at = here();
  if (peek() == '-')
    ++pos;
  auto digits = [&] {
    size_t from = pos;
    while (!done() && llvm::isDigit(peek()))
      ++pos;
    return pos - from;
  };
  size_t whole = digits();
  if (whole == 0)
    return error("expected a digit");
  if (whole > 1 && text[pos - whole] == '0')
    return fileError("not valid JSON: a number may not start with 0", at);
  bool fraction = false, exponent = false;
  if (!done() && peek() == '.') {
    ++pos;
    fraction = true;
    if (digits() == 0)
      return error("expected a digit after '.'");
  }
  if (!done() && (peek() == 'e' || peek() == 'E')) {
    ++pos;
    exponent = true;
    if (!done() && (peek() == '+' || peek() == '-'))
      ++pos;
    if (digits() == 0)
      return error("expected a digit in the exponent");
  }
  if (fraction || exponent)
    return fileError("`" + text.slice(start, pos) +
                         "` is not an integer (a metadata file holds integers "
                         "only: lengths, boundaries, scalars)",
                     at);
  return llvm::Error::success();
}

llvm::Error JsonScanner::scanWord() {
  for (llvm::StringRef word : {"true", "false", "null"})
    if (text.substr(pos).starts_with(word)) {
      pos += word.size();
      return llvm::Error::success();
    }
  return error("expected a value");
}

llvm::Error JsonScanner::scan(Visit visit) {
  size_t badUTF8 = 0;
  if (!llvm::json::isUTF8(text, &badUTF8)) {
    pos = badUTF8;
    line = 1 + static_cast<unsigned>(text.take_front(badUTF8).count('\n'));
    lineStart = text.take_front(badUTF8).rfind('\n') + 1; // npos + 1 == 0
    return error("invalid UTF-8");
  }
  llvm::SmallVector<Frame, 8> stack;
  JsonPath path;
  bool expectValue = true, finished = false;
  // A value ended: its container expects a ',' or its end.
  auto valueDone = [&] {
    if (stack.empty())
      finished = true;
    else
      stack.back().afterItem = true;
  };
  while (true) {
    skipSpace();
    if (finished) {
      if (!done())
        return error("text after the end of the document");
      return llvm::Error::success();
    }
    if (done())
      return error(stack.empty() ? "empty document"
                                 : "unexpected end of the document");
    char c = peek();
    if (expectValue) {
      expectValue = false;
      if (visit(path, here(), /*isKey=*/false))
        return llvm::Error::success();
      if (c == '{' || c == '[') {
        if (stack.size() >= kMaxMetadataNesting)
          return error("arrays and objects nested more than " +
                       llvm::Twine(kMaxMetadataNesting) +
                       " deep (a metadata file needs at most 5)");
        stack.push_back({c == '{'});
        ++pos;
        continue;
      }
      if (c == '"') {
        if (llvm::Error e = scanString(nullptr))
          return e;
      } else if (c == '-' || llvm::isDigit(c)) {
        if (llvm::Error e = scanNumber())
          return e;
      } else if (llvm::Error e = scanWord()) {
        return e;
      }
      valueDone();
      continue;
    }
    Frame &frame = stack.back();
    char close = frame.object ? '}' : ']';
    if (frame.afterItem) {
      // After an item: ',' or the end of the container.
      if (c == ',') {
        ++pos;
        frame.afterItem = false;
        frame.needItem = true;
        path.pop_back();
        if (!frame.object) {
          path.push_back(PathStep::at(++frame.index));
          expectValue = true;
        }
        continue;
      }
      if (c != close)
        return error(llvm::Twine("expected ',' or '") + llvm::Twine(close) +
                     "'");
      ++pos;
      path.pop_back();
      stack.pop_back();
      valueDone();
      continue;
    }
    if (c == close && !frame.needItem) {
      ++pos; // an empty container
      stack.pop_back();
      valueDone();
      continue;
    }
    frame.needItem = false;
    if (!frame.object) {
      path.push_back(PathStep::at(frame.index));
      expectValue = true;
      continue;
    }
    // An object member: "key" : value.
    if (c != '"')
      return error("expected a key (a string in double quotes)");
    FilePosition keyAt = here();
    std::string key;
    if (llvm::Error e = scanString(&key))
      return e;
    if (!frame.keys.insert(key).second)
      return fileError("duplicate key \"" + key +
                           "\" in an object (JSON readers would "
                           "silently keep one of the values)",
                       keyAt);
    path.push_back(PathStep::member(key));
    if (visit(path, keyAt, /*isKey=*/true))
      return llvm::Error::success();
    skipSpace();
    if (done() || peek() != ':')
      return error("expected ':' after the key");
    ++pos;
    expectValue = true;
    // The value's end marks the member done; the frame then expects ','.
  }
}

/// The position of the value (or, with `key`, of the key) at `target`; the
/// closest enclosing value that exists when it does not.
static FilePosition locate(llvm::StringRef text, const JsonPath &target,
                           bool key) {
  FilePosition best{1, 1};
  size_t bestDepth = 0;
  JsonScanner scanner(text);
  llvm::consumeError(
      scanner.scan([&](const JsonPath &path, FilePosition at, bool isKey) {
        if (path.size() > target.size() ||
            !std::equal(path.begin(), path.end(), target.begin()))
          return false;
        bool exact = path.size() == target.size();
        if (exact && isKey != key)
          return false;
        if (exact || path.size() >= bestDepth) {
          best = at;
          bestDepth = path.size();
        }
        return exact;
      }));
  return best;
}

//===----------------------------------------------------------------------===//
// Batches
//===----------------------------------------------------------------------===//

namespace {
/// A field error: its path in the document and what is wrong.
struct FieldError {
  JsonPath path;
  std::string message;
  bool atKey = false; ///< point at the key rather than the value
};

/// Checks the batches of a parsed metadata file.
class BatchReader {
public:
  BatchReader(SpecOp spec, const MetadataLimits &limits)
      : spec(spec), limits(limits) {}

  /// One batch at `base` (empty for a single-batch file); nullopt and
  /// `failure` set on the first error.
  std::optional<BatchMetadata> read(const llvm::json::Value &json,
                                    JsonPath base);
  FieldError failure;

private:
  /// Records an error at `path` (below the batch) and returns nullopt.
  std::nullopt_t fail(JsonPath path, const llvm::Twine &message,
                      bool atKey = false);
  /// `sequences[0].q_len` etc.: the path below the batch as text.
  static std::string field(llvm::ArrayRef<PathStep> path);
  /// The 32-bit integer at `v`, or nullopt.
  static std::optional<int64_t> asInt(const llvm::json::Value *v);

  SpecOp spec;
  const MetadataLimits &limits;
  JsonPath base;
};
} // namespace

std::string BatchReader::field(llvm::ArrayRef<PathStep> path) {
  std::string out;
  for (const PathStep &step : path) {
    if (step.index >= 0)
      out += "[" + std::to_string(step.index) + "]";
    else
      out += (out.empty() ? "" : ".") + step.key;
  }
  return out;
}

std::nullopt_t BatchReader::fail(JsonPath path, const llvm::Twine &message,
                                 bool atKey) {
  failure.path = base;
  failure.path.append(path.begin(), path.end());
  std::string prefix =
      base.empty() ? "" : "batch " + std::to_string(base.front().index) + ": ";
  failure.message = prefix + field(path) + ": " + message.str();
  failure.atKey = atKey;
  return std::nullopt;
}

/// Metadata values and lengths are int32, as in the device buffers the
/// runtime reads; that keeps rule arithmetic far from 64-bit overflow, which
/// the compiler's rewrites assume never happens.
std::optional<int64_t> BatchReader::asInt(const llvm::json::Value *v) {
  std::optional<int64_t> n = v ? v->getAsInteger() : std::nullopt;
  if (n && (*n < INT32_MIN || *n > INT32_MAX))
    return std::nullopt;
  return n;
}

std::optional<BatchMetadata> BatchReader::read(const llvm::json::Value &json,
                                               JsonPath batchPath) {
  base = std::move(batchPath);
  BatchMetadata batch;
  const llvm::json::Object *root = json.getAsObject();
  if (!root)
    return fail(
        {},
        "a batch must be a JSON object with \"sequences\" and \"metadata\"");
  for (auto &kv : *root)
    if (kv.first != "sequences" && kv.first != "metadata")
      return fail(
          {PathStep::member(kv.first)},
          "unknown key; a batch has only \"sequences\" and \"metadata\"",
          /*atKey=*/true);
  const llvm::json::Array *seqs = root->getArray("sequences");
  if (!seqs)
    return fail({PathStep::member("sequences")},
                "missing or not an array of {\"q_len\", \"k_len\"}");
  int64_t rows = 0, keys = 0, elements = 0;
  auto limit = [&](JsonPath at, int64_t total, int64_t bound,
                   const char *what) {
    return fail(std::move(at), limits.what + " evaluates batches of at most " +
                                   llvm::Twine(bound) + " " + what +
                                   " in all; this one has " +
                                   llvm::Twine(total) +
                                   " so far (docs/metadata-json.md, Limits)");
  };
  for (auto [b, entry] : llvm::enumerate(*seqs)) {
    JsonPath at = {PathStep::member("sequences"), PathStep::at(b)};
    const llvm::json::Object *obj = entry.getAsObject();
    if (!obj)
      return fail(at, "must be an object with q_len and k_len");
    BatchMetadata::Sequence seq;
    for (auto [key, dst] :
         {std::pair<const char *, int64_t *>{"q_len", &seq.qLen},
          {"k_len", &seq.kLen}}) {
      JsonPath here = at;
      here.push_back(PathStep::member(key));
      if (!obj->get(key))
        return fail(at, llvm::Twine("missing \"") + key + "\"");
      std::optional<int64_t> n = asInt(obj->get(key));
      if (!n)
        return fail(here, "must be a 32-bit integer");
      if (*n < 0)
        return fail(here, "must not be negative (got " + llvm::Twine(*n) + ")");
      *dst = *n;
    }
    for (auto [key, length, dst] :
         {std::tuple{"q_window", seq.qLen, &seq.qWindow},
          std::tuple{"k_window", seq.kLen, &seq.kWindow}}) {
      const llvm::json::Value *value = obj->get(key);
      if (!value)
        continue;
      JsonPath here = at;
      here.push_back(PathStep::member(key));
      if (!limits.windows)
        return fail(here, "windows are read by --cmask-to-descriptor-json only",
                    /*atKey=*/true);
      const llvm::json::Array *pair = value->getAsArray();
      std::optional<int64_t> begin, end;
      if (pair && pair->size() == 2) {
        begin = asInt(&(*pair)[0]);
        end = asInt(&(*pair)[1]);
      }
      if (!begin || !end || *begin < 0 || *end < *begin || *end > length)
        return fail(here, llvm::Twine("must be [begin, end] with 0 <= begin "
                                      "<= end <= ") +
                              (key[0] == 'q' ? "q_len" : "k_len") + " (" +
                              llvm::Twine(length) + ")");
      *dst = std::pair{*begin, *end};
    }
    for (auto &kv : *obj)
      if (kv.first != "q_len" && kv.first != "k_len" &&
          kv.first != "q_window" && kv.first != "k_window") {
        JsonPath here = at;
        here.push_back(PathStep::member(kv.first));
        return fail(here,
                    "unknown key; a sequence has q_len, k_len and (for "
                    "--cmask-to-descriptor-json) q_window, k_window",
                    /*atKey=*/true);
      }
    rows += seq.qLen;
    keys += seq.kLen;
    // Each product is below 2^62 and the sum is checked at every step.
    if (limits.maxElements)
      elements += seq.qLen * seq.kLen;
    JsonPath qAt = at, kAt = at;
    qAt.push_back(PathStep::member("q_len"));
    kAt.push_back(PathStep::member("k_len"));
    if (limits.maxRows && rows > limits.maxRows)
      return limit(qAt, rows, limits.maxRows, "query rows");
    if (limits.maxKeys && keys > limits.maxKeys)
      return limit(kAt, keys, limits.maxKeys, "keys");
    if (limits.maxElements && elements > limits.maxElements)
      return limit(qAt, elements, limits.maxElements, "(query, key) pairs");
    batch.sequences.push_back(seq);
  }

  const llvm::json::Object *meta = root->getObject("metadata");
  llvm::json::Object empty;
  if (!meta) {
    if (root->get("metadata"))
      return fail({PathStep::member("metadata")}, "must be an object");
    meta = &empty;
  }
  llvm::StringMap<MetadataRole> declared;
  for (MetadataOp decl : spec.getMetadata())
    declared[decl.getSymName()] = decl.getRole();
  for (auto &kv : *meta)
    if (!declared.count(kv.first.str()))
      return fail({PathStep::member("metadata"), PathStep::member(kv.first)},
                  "is not declared by spec @" + spec.getSymName(),
                  /*atKey=*/true);
  size_t numSeqs = batch.sequences.size();
  for (MetadataOp decl : spec.getMetadata()) {
    llvm::StringRef name = decl.getSymName();
    JsonPath at = {PathStep::member("metadata"), PathStep::member(name)};
    const llvm::json::Value *v = meta->get(name);
    llvm::StringRef role = stringifyMetadataRole(decl.getRole());
    if (!v)
      return fail(at, "missing (declared as " + role + ")");
    auto element = [&](JsonPath path, size_t k) {
      path.push_back(PathStep::at(static_cast<int64_t>(k)));
      return path;
    };
    switch (decl.getRole()) {
    case MetadataRole::scalar: {
      auto n = asInt(v);
      if (!n)
        return fail(at, "is scalar metadata: must be a 32-bit integer");
      batch.scalars[name] = *n;
      break;
    }
    case MetadataRole::per_sequence: {
      const llvm::json::Array *arr = v->getAsArray();
      if (!arr)
        return fail(
            at,
            "is per_sequence metadata: must be an array with one integer per "
            "sequence");
      if (arr->size() != numSeqs)
        return fail(at, "has " + llvm::Twine(arr->size()) +
                            " entries but the batch has " +
                            llvm::Twine(numSeqs) + " sequences");
      std::vector<int64_t> values;
      for (auto [k, e] : llvm::enumerate(*arr)) {
        auto n = asInt(&e);
        if (!n)
          return fail(element(at, k), "must be a 32-bit integer");
        values.push_back(*n);
      }
      batch.perSequence[name] = std::move(values);
      break;
    }
    case MetadataRole::offsets: {
      const llvm::json::Array *arr = v->getAsArray();
      if (!arr)
        return fail(at,
                    "is offsets metadata: must be an array with one array of "
                    "boundaries per sequence");
      if (arr->size() != numSeqs)
        return fail(at, "has " + llvm::Twine(arr->size()) +
                            " entries but the batch has " +
                            llvm::Twine(numSeqs) + " sequences");
      std::vector<std::vector<int64_t>> lists;
      for (auto [b, e] : llvm::enumerate(*arr)) {
        JsonPath sub = element(at, b);
        const llvm::json::Array *inner = e.getAsArray();
        if (!inner)
          return fail(sub, "must be an array of boundaries (integers)");
        int64_t length =
            std::max(batch.sequences[b].qLen, batch.sequences[b].kLen);
        std::vector<int64_t> bounds;
        for (auto [k, x] : llvm::enumerate(*inner)) {
          auto n = asInt(&x);
          if (!n)
            return fail(element(sub, k), "must be a 32-bit integer");
          if (*n < 0)
            return fail(element(sub, k), "offsets must not be negative (got " +
                                             llvm::Twine(*n) + ")");
          if (*n > length)
            return fail(element(sub, k), "offset " + llvm::Twine(*n) +
                                             " is past the sequence's length " +
                                             llvm::Twine(length));
          if (!bounds.empty() && *n < bounds.back())
            return fail(element(sub, k), "offsets must be non-decreasing (" +
                                             llvm::Twine(*n) + " after " +
                                             llvm::Twine(bounds.back()) + ")");
          bounds.push_back(*n);
        }
        lists.push_back(std::move(bounds));
      }
      batch.offsets[name] = std::move(lists);
      break;
    }
    }
  }
  return batch;
}

llvm::Expected<MetadataFile>
mlir::cmask::parseMetadataText(llvm::StringRef text, SpecOp spec,
                               const MetadataLimits &limits) {
  // 1. Structure, nesting, duplicate keys, integers; the batches' positions.
  MetadataFile file;
  JsonScanner scanner(text);
  if (llvm::Error e =
          scanner.scan([&](const JsonPath &path, FilePosition at, bool isKey) {
            if (!isKey &&
                (path.empty() || (path.size() == 1 && path[0].index >= 0)))
              file.positions.push_back(at);
            return false;
          }))
    return std::move(e);
  // 2. Values (the text is known to be valid and shallow).
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return fileError("not valid JSON: " + llvm::toString(json.takeError()),
                     {1, 1});
  // 3. The batches.
  BatchReader reader(spec, limits);
  auto check = [&](const llvm::json::Value &value,
                   JsonPath base) -> llvm::Error {
    std::optional<BatchMetadata> batch = reader.read(value, std::move(base));
    if (!batch)
      return fileError(reader.failure.message,
                       locate(text, reader.failure.path, reader.failure.atKey));
    file.batches.push_back(std::move(*batch));
    return llvm::Error::success();
  };
  if (const llvm::json::Array *array = json->getAsArray()) {
    file.isArray = true;
    file.positions.erase(file.positions.begin()); // the array itself
    for (auto [k, entry] : llvm::enumerate(*array))
      if (llvm::Error e = check(entry, {PathStep::at(static_cast<int64_t>(k))}))
        return std::move(e);
    return file;
  }
  if (llvm::Error e = check(*json, {}))
    return std::move(e);
  return file;
}

llvm::Expected<MetadataFile>
mlir::cmask::readMetadataFile(llvm::StringRef path, SpecOp spec,
                              const MetadataLimits &limits) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fileError(
        "cannot read the metadata file: " + buffer.getError().message(), {});
  return parseMetadataText((*buffer)->getBuffer(), spec, limits);
}
