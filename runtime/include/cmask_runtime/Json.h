//===- Json.h - A small JSON reader for manifests and metadata --*- C++ -*-===//
//
// The runtime builds without LLVM or MLIR, so it carries this minimal
// reader: objects, arrays, strings (\" \\ \n \t \uXXXX ASCII), integers,
// numbers, true/false/null.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_JSON_H
#define CMASK_RUNTIME_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cmask::rt::json {

struct Value {
  enum class Kind {
    Null,
    Bool,
    Int,
    Double,
    String,
    Array,
    Object
  } kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isInt() const { return kind == Kind::Int; }
  bool isString() const { return kind == Kind::String; }
  /// The member `key` of an object, or nullptr.
  const Value *get(const std::string &key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

/// Parses `text`; on failure returns false and sets `error` (with offset).
bool parse(const std::string &text, Value &out, std::string &error);

} // namespace cmask::rt::json

#endif // CMASK_RUNTIME_JSON_H
