#pragma once
// A minimal JSON reader for tests (objects, arrays, strings, numbers, true/false/null).
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace crema::testing {

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
  bool has(const std::string& key) const;
  // The member `key` (a null Json when absent) / element `i`.
  const Json& operator[](const std::string& key) const;
  const Json& operator[](size_t i) const { return array.at(i); }
  size_t size() const { return is_array() ? array.size() : object.size(); }
  std::vector<std::string> strings() const;  // an array of strings
  std::vector<int64_t> ints() const;         // an array of numbers
  // Compact text form, for failure messages.
  std::string Dump() const;
};

// Throws std::runtime_error("json: ... at offset N") on malformed input.
Json ParseJson(const std::string& text);

}  // namespace crema::testing
