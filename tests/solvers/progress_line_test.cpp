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

TEST(ProgressLine, FormatCount) {
  // 1200 of 5000 at 800/s: 3800 left take 4.75 s -> "5s"; 24 cells * 0.24 = 5.76 -> 5 filled.
  EXPECT_EQ(ProgressLine::FormatCount(1200, 5000, "images", 800, 24),
            "[=====>                  ] 1200/5000 images  800 images/s  ETA 5s");
  EXPECT_EQ(ProgressLine::FormatCount(0, 60000, "images", 0, 4), "[>   ] 0/60000 images");
  EXPECT_EQ(ProgressLine::FormatCount(10, 10, "images", 2.4, 4),
            "[====] 10/10 images  2 images/s  ETA 0s");
  // 59000 left at 20/s = 2950 s = 49m10s; an empty total draws an empty bar.
  EXPECT_EQ(ProgressLine::FormatCount(1000, 60000, "records", 20, 2),
            "[> ] 1000/60000 records  20 records/s  ETA 49m10s");
  EXPECT_EQ(ProgressLine::FormatCount(0, 0, "images", 0, 2), "[> ] 0/0 images");
  EXPECT_EQ(ProgressLine::Duration(-1), "?");
  EXPECT_EQ(ProgressLine::Duration(7322), "2h02m");
}

TEST(ProgressLine, ShowRedrawsAnyLine) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    ProgressLine line(out);
    line.Show("1/3", true);
    line.Show("3/3", true);
  }
  std::fclose(out);
  const std::string text(buffer, size);
  free(buffer);
  EXPECT_EQ(text, "1/3\r\033[2K3/3\n");
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
