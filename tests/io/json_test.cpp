// io/json: the one JSON writer and reader. Round trips of what crema writes, the JSON grammar
// (strict numbers, escapes, surrogate pairs), and malformed input as a JsonSyntaxError with the
// offset -- never another exception (a bad \u escape once escaped as std::invalid_argument).
#include "io/json.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace crema {
namespace {

TEST(JsonWriter, Numbers) {
  EXPECT_EQ(JsonNumber(0), "0");
  EXPECT_EQ(JsonNumber(-0.0), "0");
  EXPECT_EQ(JsonNumber(1), "1");
  EXPECT_EQ(JsonNumber(-42), "-42");
  EXPECT_EQ(JsonNumber(static_cast<float>(0.3)), "0.3");
  EXPECT_EQ(JsonNumber(0.01), "0.01");
  EXPECT_EQ(JsonNumber(1e-8f), "1e-08");
  EXPECT_EQ(JsonNumber(2.302585092994046), "2.3025851");  // a float's digits
  EXPECT_EQ(JsonNumber(std::nan("")), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonWriter, Strings) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\t\r", 3)), "\"\\u0001\\t\\r\"");
  EXPECT_EQ(JsonQuote("caf\xC3\xA9"), "\"caf\xC3\xA9\"");  // UTF-8 passes through
}

TEST(JsonReader, RoundTripsWhatTheWriterWrites) {
  for (const std::string& text :
       {std::string("loss/\"x\"\\y"), std::string("a\nb\x1f"), std::string("caf\xC3\xA9")}) {
    const Json parsed = ParseJson(JsonQuote(text));
    EXPECT_EQ(parsed.type, Json::Type::kString);
    EXPECT_EQ(parsed.string, text);
  }
  for (double value : {0.0, 1.0, -3.5, 0.1f * 1.0, 1e-8, 123456789.0}) {
    const Json parsed = ParseJson(JsonNumber(value));
    EXPECT_EQ(static_cast<float>(parsed.number), static_cast<float>(value)) << value;
  }
  EXPECT_EQ(ParseJson(JsonNumber(NAN)).type, Json::Type::kNull);
}

TEST(JsonReader, Documents) {
  const Json doc = ParseJson(
      " {\"a\": [1, -2.5e1, \"x\\u0041\", true, false, null], \"b\": {\"c\": {}}, \"e\": []}\n");
  ASSERT_TRUE(doc.is_object());
  ASSERT_EQ(doc.size(), 3u);
  EXPECT_EQ(doc.object[0].first, "a");  // file order
  const Json& a = doc["a"];
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0].number, 1);
  EXPECT_EQ(a[1].number, -25);
  EXPECT_EQ(a[2].string, "xA");
  EXPECT_TRUE(a[3].boolean);
  EXPECT_EQ(a[4].type, Json::Type::kBool);
  EXPECT_FALSE(a[4].boolean);
  EXPECT_EQ(a[5].type, Json::Type::kNull);
  EXPECT_TRUE(doc["b"]["c"].is_object());
  EXPECT_TRUE(doc.has("e"));
  EXPECT_FALSE(doc.has("z"));
  EXPECT_EQ(doc["z"].type, Json::Type::kNull);
  EXPECT_EQ(doc.Find("z"), nullptr);
  EXPECT_EQ(ParseJson("[3, 4]").ints(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ParseJson("[\"p\", \"q\"]").strings(), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(doc.Dump(), "{\"a\":[1,-25,\"xA\",true,false,null],\"b\":{\"c\":{}},\"e\":[]}");
}

TEST(JsonReader, EscapesBecomeUtf8) {
  EXPECT_EQ(ParseJson("\"\\u00e9\"").string, "\xC3\xA9");
  EXPECT_EQ(ParseJson("\"\\u20AC\"").string, "\xE2\x82\xAC");
  EXPECT_EQ(ParseJson("\"\\ud83d\\ude00\"").string, "\xF0\x9F\x98\x80");  // a surrogate pair
  EXPECT_EQ(ParseJson("\"\\ud83d!\"").string, "\xEF\xBF\xBD!");           // a lone half
  EXPECT_EQ(ParseJson("\"\\/\\b\\f\"").string, "/\b\f");
}

// The offset and message of the error `text` raises; fails the test when it parses.
std::pair<size_t, std::string> ErrorOf(const std::string& text) {
  try {
    ParseJson(text);
  } catch (const JsonSyntaxError& e) {
    return {e.offset(), e.message()};
  }
  ADD_FAILURE() << "parsed: " << text;
  return {0, ""};
}

TEST(JsonReader, MalformedInputIsASyntaxErrorWithItsOffset) {
  const std::pair<const char*, const char*> messages[] = {
      {"\"\\uZZZZ\"", "a \\u escape needs four hex digits"},
      {"\"\\u12", "a \\u escape needs four hex digits"},
      {"\"\\q\"", "an unknown escape '\\q'"},
      {"\"abc", "an unterminated string"},
      {"\"a\tb\"", "a control character inside a string"},
      {"{\"a\": 1,}", "expected a string key"},
      {"[1 2]", "expected ']'"},
      {"[1,", "expected a value, found the end of the text"},
      {"", "expected a value, found the end of the text"},
      {"{} {}", "unexpected text after the JSON value"}};
  for (const auto& [text, message] : messages) EXPECT_EQ(ErrorOf(text).second, message) << text;
  const std::pair<const char*, size_t> offsets[] = {
      {"\"\\u12\"", 3}, {"{\"a\" 1}", 5}, {"nul", 0}, {"tru", 0}};
  for (const auto& [text, offset] : offsets) EXPECT_EQ(ErrorOf(text).first, offset) << text;
  // JSON's number grammar, not strtod's.
  for (const char* bad : {"+1", ".5", "1.", "01", "1e", "-", "0x10", "inf", "NaN", "1e+"})
    EXPECT_FALSE(ErrorOf(bad).second.empty()) << bad;
  EXPECT_EQ(ParseJson("-0.5E+2").number, -50);
  EXPECT_EQ(ErrorOf(std::string(300, '[') + std::string(300, ']')).second,
            "nested more than 256 levels deep");
  EXPECT_NO_THROW(ParseJson(std::string(200, '[') + std::string(200, ']')));
}

}  // namespace
}  // namespace crema
