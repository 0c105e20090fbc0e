#pragma once
// JSON, the one reader and writer (crema inspect --json, metrics.jsonl, crema plot, the tests'
// reference manifests). The writer formats values (JsonQuote, JsonNumber); the reader parses a
// whole document into a Json tree, keeping object members in file order.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace crema {

// ---- writing ----

// A JSON string literal (quotes included): ", \ and control characters escaped; other bytes
// (UTF-8) as they are.
std::string JsonQuote(const std::string& text);
// A number: integers without a fraction, others as the shortest decimal that reads back as the
// same float (as the same double where a float cannot hold the value); NaN and infinities,
// which JSON lacks, as null.
std::string JsonNumber(double value);

// ---- reading ----

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in file order

  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
  bool has(const std::string& key) const { return Find(key) != nullptr; }
  // The member `key`, or null when absent (or not an object).
  const Json* Find(const std::string& key) const;
  // The member `key` (a null Json when absent) / element `i`.
  const Json& operator[](const std::string& key) const;
  const Json& operator[](size_t i) const { return array.at(i); }
  size_t size() const { return is_array() ? array.size() : object.size(); }
  std::vector<std::string> strings() const;  // an array of strings
  std::vector<int64_t> ints() const;         // an array of numbers
  // Compact text form (for messages).
  std::string Dump() const;
};

// Malformed JSON: what was expected, and the byte offset (0-based) where.
class JsonSyntaxError : public std::runtime_error {
 public:
  JsonSyntaxError(const std::string& message, size_t offset);
  const std::string& message() const { return message_; }
  size_t offset() const { return offset_; }

 private:
  std::string message_;
  size_t offset_;
};

// Parses one JSON value filling all of `text` (white space around it allowed); JsonSyntaxError
// otherwise, also for nesting deeper than 256 levels. \u escapes become UTF-8 (surrogate pairs
// joined).
Json ParseJson(const std::string& text);

}  // namespace crema
