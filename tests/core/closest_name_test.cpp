// The one "did you mean" helper: case-insensitive edit distance, the typo threshold, ties, and
// names holding bytes above 127 (UTF-8), which go to std::tolower as unsigned char values.
#include "core/closest_name.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace crema {
namespace {

TEST(ClosestName, EditDistanceIgnoresAsciiCase) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("ReLU", "relu"), 0u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("Convolution", "Convolutoin"), 2u);
}

TEST(ClosestName, BytesAbove127CompareAsThemselves) {
  // "café" and "cafÉ" in UTF-8 differ in one byte that no locale-free tolower folds.
  const std::string lower = "caf\xC3\xA9", upper = "CAF\xC3\x89";
  EXPECT_EQ(EditDistance(lower, lower), 0u);
  EXPECT_EQ(EditDistance(lower, upper), 1u);
  EXPECT_EQ(EditDistance("\xFF\xFE", "\xFF"), 1u);
  EXPECT_EQ(ClosestName("caf\xC3\xA8", std::vector<std::string>{"tea", lower}), lower);
}

TEST(ClosestName, SuggestsOnlyLikelyTypos) {
  const std::vector<std::string> types = {"Convolution", "InnerProduct", "ReLU", "Sigmoid"};
  EXPECT_EQ(ClosestName("Relu", types), "ReLU");
  EXPECT_EQ(ClosestName("Convoluton", types), "Convolution");
  EXPECT_EQ(ClosestName("InnerProdcut", types), "InnerProduct");
  // At most max(2, length / 3) edits: "Softmax" is 6 from "Sigmoid", the closest.
  EXPECT_EQ(ClosestName("Softmax", types), "");
  EXPECT_EQ(ClosestName("Xyz", types), "");
  // Short names still allow two edits.
  EXPECT_EQ(ClosestName("lr", std::set<std::string>{"lrn", "momentum"}), "lrn");
  EXPECT_EQ(ClosestName("anything", std::vector<std::string>{}), "");
}

TEST(ClosestName, TiesGoToTheFirstInOrder) {
  EXPECT_EQ(ClosestName("cat", std::vector<std::string>{"bat", "car"}), "bat");
  EXPECT_EQ(ClosestName("cat", std::vector<std::string>{"car", "bat"}), "car");
  EXPECT_EQ(ClosestName("cat", std::set<std::string>{"car", "bat"}), "bat");  // sorted
}

}  // namespace
}  // namespace crema
