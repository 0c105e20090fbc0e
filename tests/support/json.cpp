#include "support/json.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace crema::testing {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Json ParseDocument() {
    Json value = ParseValue();
    SkipSpace();
    if (pos_ != text_.size()) Fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error("json: " + what + " at offset " + std::to_string(pos_));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void Expect(char c) {
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool Consume(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  Json ParseValue() {
    Json v;
    const char c = Peek();
    if (c == '{') {
      v.type = Json::Type::kObject;
      ++pos_;
      if (Peek() == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        if (Peek() != '"') Fail("expected a key");
        std::string key = ParseString();
        Expect(':');
        v.object.emplace_back(std::move(key), ParseValue());
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        Expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = Json::Type::kArray;
      ++pos_;
      if (Peek() == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        v.array.push_back(ParseValue());
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        Expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = Json::Type::kString;
      v.string = ParseString();
      return v;
    }
    if (Consume("true")) {
      v.type = Json::Type::kBool;
      v.boolean = true;
      return v;
    }
    if (Consume("false")) {
      v.type = Json::Type::kBool;
      return v;
    }
    if (Consume("null")) return v;
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      const char* start = text_.c_str() + pos_;
      char* end = nullptr;
      v.type = Json::Type::kNumber;
      v.number = std::strtod(start, &end);
      if (end == start) Fail("bad number");
      pos_ += end - start;
      return v;
    }
    Fail("unexpected character");
  }

  std::string ParseString() {
    Expect('"');
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail("unterminated escape");
      c = text_[pos_++];
      switch (c) {
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
          if (pos_ + 4 > text_.size()) Fail("bad \\u escape");
          const unsigned code = std::stoul(text_.substr(pos_, 4), nullptr, 16);
          pos_ += 4;
          // UTF-8 encode (surrogate pairs are not combined; tests do not need them).
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xc0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (code & 0x3f));
          }
          break;
        }
        default:
          out += c;  // \" \\ \/
      }
    }
    if (pos_ >= text_.size()) Fail("unterminated string");
    ++pos_;
    return out;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

bool Json::has(const std::string& key) const {
  for (const auto& kv : object)
    if (kv.first == key) return true;
  return false;
}

const Json& Json::operator[](const std::string& key) const {
  static const Json kNull;
  for (const auto& kv : object)
    if (kv.first == key) return kv.second;
  return kNull;
}

std::vector<std::string> Json::strings() const {
  std::vector<std::string> out;
  for (const Json& v : array) out.push_back(v.string);
  return out;
}

std::vector<int64_t> Json::ints() const {
  std::vector<int64_t> out;
  for (const Json& v : array) out.push_back(static_cast<int64_t>(v.number));
  return out;
}

std::string Json::Dump() const {
  std::ostringstream os;
  switch (type) {
    case Type::kNull:
      os << "null";
      break;
    case Type::kBool:
      os << (boolean ? "true" : "false");
      break;
    case Type::kNumber:
      os << number;
      break;
    case Type::kString:
      os << '"' << string << '"';
      break;
    case Type::kArray:
      os << '[';
      for (size_t i = 0; i < array.size(); ++i) os << (i ? "," : "") << array[i].Dump();
      os << ']';
      break;
    case Type::kObject:
      os << '{';
      for (size_t i = 0; i < object.size(); ++i)
        os << (i ? "," : "") << '"' << object[i].first << "\":" << object[i].second.Dump();
      os << '}';
      break;
  }
  return os.str();
}

Json ParseJson(const std::string& text) { return Parser(text).ParseDocument(); }

}  // namespace crema::testing
