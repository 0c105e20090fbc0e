// The terminal progress line: its text, and that messages print above it.
#include "solvers/progress_line.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace crema {
namespace {

TEST(ProgressLine, Format) {
  EXPECT_EQ(ProgressLine::Format(250, 1000, 0.41234, 0.01, 25, 8),
            "[==>     ] iter 250/1000  loss 0.4123  lr 0.01  25 it/s  ETA 30s");
  EXPECT_EQ(ProgressLine::Format(0, 100, 2.5, 0.1, 0, 4), "[>   ] iter 0/100  loss 2.5  lr 0.1");
  EXPECT_EQ(ProgressLine::Format(100, 100, 0.5, 0.1, 10, 4),
            "[====] iter 100/100  loss 0.5  lr 0.1  10 it/s  ETA 0s");
  // Hours and minutes.
  EXPECT_NE(ProgressLine::Format(0, 100000, 1, 1, 10, 4).find("ETA 2h46m"), std::string::npos);
  EXPECT_NE(ProgressLine::Format(0, 1000, 1, 1, 10, 4).find("ETA 1m40s"), std::string::npos);
}

TEST(ProgressLine, MessagesGoAboveTheLine) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    ProgressLine line(out);
    line.Update(1, 10, 1.0, 0.1, 0, true);
    line.Message("Test net #0: accuracy = 0.5");
    line.Update(2, 10, 0.9, 0.1, 0, true);
  }
  std::fclose(out);
  const std::string text(buffer, size);
  free(buffer);
  const std::string first = ProgressLine::Format(1, 10, 1.0, 0.1, 0, 24);
  const std::string second = ProgressLine::Format(2, 10, 0.9, 0.1, 0, 24);
  EXPECT_EQ(text,
            first + "\r\033[2KTest net #0: accuracy = 0.5\n" + first + "\r\033[2K" + second + "\n");
}

}  // namespace
}  // namespace crema
