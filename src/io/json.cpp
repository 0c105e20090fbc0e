#include "io/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace crema {

// ---- writing ----

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
    return std::string(buffer) == "-0" ? "0" : buffer;
  }
  char buffer[40];
  // Losses, rates and weights are floats: the shortest text that reads back as the same float.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (precision >= 9 ? std::strtod(buffer, nullptr) == value
                       : std::strtof(buffer, nullptr) == static_cast<float>(value))
      break;
  }
  return buffer;
}

// ---- reading ----

namespace {

constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Json ParseDocument() {
    Json value = ParseValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& message) const { throw JsonSyntaxError(message, pos_); }
  bool AtEnd() const { return pos_ >= text_.size(); }
  void SkipSpace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r' ||
                        text_[pos_] == '\n'))
      ++pos_;
  }
  void Expect(char c) {
    SkipSpace();
    if (AtEnd()) Fail(std::string("expected '") + c + "', found the end of the text");
    if (text_[pos_] != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  Json ParseValue(int depth) {
    if (depth > kMaxDepth) Fail("nested more than 256 levels deep");
    SkipSpace();
    if (AtEnd()) Fail("expected a value, found the end of the text");
    Json value;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      value.type = Json::Type::kObject;
      if (Consume('}')) return value;
      do {
        SkipSpace();
        if (AtEnd() || text_[pos_] != '"') Fail("expected a string key");
        std::string key = ParseString();
        Expect(':');
        value.object.emplace_back(std::move(key), ParseValue(depth + 1));
      } while (Consume(','));
      Expect('}');
    } else if (c == '[') {
      ++pos_;
      value.type = Json::Type::kArray;
      if (Consume(']')) return value;
      do {
        value.array.push_back(ParseValue(depth + 1));
      } while (Consume(','));
      Expect(']');
    } else if (c == '"') {
      value.type = Json::Type::kString;
      value.string = ParseString();
    } else if (ConsumeWord("null")) {
    } else if (ConsumeWord("true")) {
      value.type = Json::Type::kBool;
      value.boolean = true;
    } else if (ConsumeWord("false")) {
      value.type = Json::Type::kBool;
    } else if (c == '-' || IsDigit(c)) {
      value.type = Json::Type::kNumber;
      value.number = ParseNumber();
    } else {
      Fail("expected a value (object, array, string, number, true, false or null)");
    }
    return value;
  }

  // JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, converted by strtod.
  double ParseNumber() {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (AtEnd() || !IsDigit(text_[pos_])) Fail("expected a digit");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    if (!AtEnd() && text_[pos_] == '.') {
      ++pos_;
      if (AtEnd() || !IsDigit(text_[pos_])) Fail("expected a digit after '.'");
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    if (!AtEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!AtEnd() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (AtEnd() || !IsDigit(text_[pos_])) Fail("expected a digit in the exponent");
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    return std::strtod(text_.substr(start, pos_ - start).c_str(), nullptr);
  }

  // Four hex digits after "\u".
  unsigned ParseHex4() {
    if (pos_ + 4 > text_.size()) Fail("a \\u escape needs four hex digits");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_];
      unsigned digit;
      if (h >= '0' && h <= '9')
        digit = static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f')
        digit = static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        digit = static_cast<unsigned>(h - 'A' + 10);
      else
        Fail("a \\u escape needs four hex digits");
      code = code * 16 + digit;
      ++pos_;
    }
    return code;
  }

  static void AppendUtf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xC0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      *out += static_cast<char>(0xE0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (code >> 18));
      *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string ParseString() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (AtEnd()) Fail("an unterminated string");
      const char c = text_[pos_];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) Fail("a control character inside a string");
      ++pos_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (AtEnd()) Fail("an unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = ParseHex4();
          if (code >= 0xD800 && code < 0xDC00 && text_.compare(pos_, 2, "\\u") == 0) {
            const size_t back = pos_;
            pos_ += 2;
            const unsigned low = ParseHex4();
            if (low >= 0xDC00 && low < 0xE000)
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            else
              pos_ = back;  // not a pair: the high half stands alone
          }
          if (code >= 0xD800 && code < 0xE000) code = 0xFFFD;  // a lone surrogate
          AppendUtf8(code, &out);
          break;
        }
        default:
          --pos_;
          Fail(std::string("an unknown escape '\\") + e + "'");
      }
    }
    ++pos_;  // the closing quote
    return out;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

JsonSyntaxError::JsonSyntaxError(const std::string& message, size_t offset)
    : std::runtime_error("json: " + message + " at offset " + std::to_string(offset)),
      message_(message),
      offset_(offset) {}

const Json* Json::Find(const std::string& key) const {
  for (const auto& [name, value] : object)
    if (name == key) return &value;
  return nullptr;
}

const Json& Json::operator[](const std::string& key) const {
  static const Json kNull;
  const Json* value = Find(key);
  return value != nullptr ? *value : kNull;
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
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return boolean ? "true" : "false";
    case Type::kNumber:
      return JsonNumber(number);
    case Type::kString:
      return JsonQuote(string);
    case Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < array.size(); ++i) out += (i ? "," : "") + array[i].Dump();
      return out + "]";
    }
    case Type::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < object.size(); ++i)
        out += (i ? "," : "") + JsonQuote(object[i].first) + ":" + object[i].second.Dump();
      return out + "}";
    }
  }
  return "null";
}

Json ParseJson(const std::string& text) { return Parser(text).ParseDocument(); }

}  // namespace crema
