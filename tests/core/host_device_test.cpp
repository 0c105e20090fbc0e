#include "core/host_device.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>

namespace crema {
namespace {

TEST(LabelIndex, TruncatesTowardsZeroLikeCaffesCast) {
  EXPECT_EQ(LabelIndex(2.0f), 2);
  EXPECT_EQ(LabelIndex(2.7), 2);
  EXPECT_EQ(LabelIndex(-0.5), 0);
  EXPECT_EQ(LabelIndex(-1.0f), -1);
  EXPECT_EQ(LabelIndex(255.0), 255);
  // The int range's ends still convert.
  EXPECT_EQ(LabelIndex(2147483647.0), INT_MAX);
  EXPECT_EQ(LabelIndex(-2147483648.0), INT_MIN);
  EXPECT_EQ(LabelIndex(2147483520.0f), 2147483520);  // the largest float below 2^31
}

TEST(LabelIndex, ValuesWithoutAnIntGiveIntMin) {
  EXPECT_EQ(LabelIndex(std::nanf("")), INT_MIN);
  EXPECT_EQ(LabelIndex(std::nan("")), INT_MIN);
  EXPECT_EQ(LabelIndex(std::numeric_limits<float>::infinity()), INT_MIN);
  EXPECT_EQ(LabelIndex(-std::numeric_limits<double>::infinity()), INT_MIN);
  EXPECT_EQ(LabelIndex(2147483648.0), INT_MIN);
  EXPECT_EQ(LabelIndex(2147483648.0f), INT_MIN);
  EXPECT_EQ(LabelIndex(-2147483649.0), INT_MIN);
  EXPECT_EQ(LabelIndex(1e30f), INT_MIN);
}

}  // namespace
}  // namespace crema
