//===- Json.cpp - A small JSON reader -------------------------------------===//
//
// The runtime's JSON reader (Json.h) for manifests: a recursive descent
// parser bounded in depth, refusing duplicate keys, the first error given
// with its byte offset.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/Json.h"

#include <cstdlib>

using namespace cmask::rt::json;

namespace {
class Parser {
public:
  explicit Parser(const std::string &text) : s(text) {}

  bool parseDocument(Value &out, std::string &error) {
    if (!value(out) || (skip(), pos != s.size())) {
      error = (message.empty() ? std::string("trailing characters") : message) +
              " at offset " + std::to_string(pos);
      return false;
    }
    return true;
  }

private:
  bool fail(const char *why) {
    if (message.empty())
      message = why;
    return false;
  }
  void skip() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' ||
                              s[pos] == '\t' || s[pos] == '\r'))
      ++pos;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(pos, n, word) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }
  bool str(std::string &out) {
    if (s[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < s.size() && s[pos] != '"') {
      char c = s[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= s.size())
        return fail("unterminated escape");
      char e = s[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (pos + 4 > s.size())
          return fail("bad \\u escape");
        long code = std::strtol(s.substr(pos, 4).c_str(), nullptr, 16);
        pos += 4;
        if (code >= 0x80)
          return fail("non-ASCII \\u escapes are not supported");
        out += static_cast<char>(code);
        break;
      }
      default:
        return fail("bad escape");
      }
    }
    if (pos >= s.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }
  bool value(Value &out) {
    skip();
    if (pos >= s.size())
      return fail("unexpected end of input");
    char c = s[pos];
    if (c == '{' || c == '[') {
      // Bounded recursion (a manifest nests 4 deep).
      if (depth >= kMaxDepth)
        return fail("arrays and objects nested too deep");
      ++depth;
      bool ok = c == '{' ? object(out) : array(out);
      --depth;
      return ok;
    }
    return scalar(out, c);
  }
  bool object(Value &out) {
    out.kind = Value::Kind::Object;
    ++pos;
    skip();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skip();
      std::string key;
      if (!str(key))
        return false;
      skip();
      if (pos >= s.size() || s[pos] != ':')
        return fail("expected ':'");
      ++pos;
      if (out.object.count(key))
        return fail("duplicate key");
      if (!value(out.object[key]))
        return false;
      skip();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }
  bool array(Value &out) {
    out.kind = Value::Kind::Array;
    ++pos;
    skip();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      out.array.emplace_back();
      if (!value(out.array.back()))
        return false;
      skip();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }
  bool scalar(Value &out, char c) {
    if (c == '"') {
      out.kind = Value::Kind::String;
      return str(out.string);
    }
    if (c == 't') {
      out.kind = Value::Kind::Bool;
      out.boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      out.kind = Value::Kind::Bool;
      return literal("false");
    }
    if (c == 'n')
      return literal("null");
    size_t start = pos;
    if (s[pos] == '-')
      ++pos;
    bool isDouble = false;
    while (pos < s.size() &&
           (isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.' ||
            s[pos] == 'e' || s[pos] == 'E' || s[pos] == '+' || s[pos] == '-')) {
      isDouble |= s[pos] == '.' || s[pos] == 'e' || s[pos] == 'E';
      ++pos;
    }
    if (pos == start)
      return fail("unexpected character");
    std::string number = s.substr(start, pos - start);
    if (isDouble) {
      out.kind = Value::Kind::Double;
      out.number = std::strtod(number.c_str(), nullptr);
    } else {
      out.kind = Value::Kind::Int;
      out.integer = std::strtoll(number.c_str(), nullptr, 10);
      out.number = static_cast<double>(out.integer);
    }
    return true;
  }

  static constexpr int kMaxDepth = 64;
  const std::string &s;
  size_t pos = 0;
  int depth = 0;
  std::string message;
};
} // namespace

bool cmask::rt::json::parse(const std::string &text, Value &out,
                            std::string &error) {
  out = Value();
  return Parser(text).parseDocument(out, error);
}
