// Hostile shapes: a blob larger than the element bound (Caffe's INT_MAX, or
// CREMA_MAX_BLOB_ELEMENTS) is refused while the net is built, naming the file, line and layer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "crema/layer_registry.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RunCrema;
using testing::WriteText;

std::string InputNet(const std::string& dims) {
  return "name: \"big\"\nlayer { name: \"d\" type: \"Input\" top: \"d\"\n"
         "  input_param { shape { " +
         dims + " } } }\n";
}

class BlobBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!LayerRegistry::Has("Input")) GTEST_SKIP() << "Input not registered";
    dir_ = ::testing::TempDir() + "/blob_bound_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    unsetenv("CREMA_MAX_BLOB_ELEMENTS");
  }
  void TearDown() override { unsetenv("CREMA_MAX_BLOB_ELEMENTS"); }
  std::string Write(const std::string& text) {
    WriteText(dir_ + "/net.prototxt", text);
    return dir_ + "/net.prototxt";
  }
  std::string dir_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// 2^31 elements (one more than INT_MAX): refused by default, before anything is allocated.
TEST_F(BlobBoundTest, OneElementOverCaffesLimitIsRefused) {
  const std::string path = Write(InputNet("dim: 2 dim: 1024 dim: 1024 dim: 1024"));
  const auto r = RunCrema("forward --model " + path + " --output-dir " + dir_ + "/out");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "net.prototxt:2:")) << r.output;
  EXPECT_TRUE(Contains(r.output, "layer \"d\" (Input)")) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "2 x 1024 x 1024 x 1024 has 2147483648 elements, more than "
                       "the bound of 2147483647"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/out/d.npy"));
}

TEST_F(BlobBoundTest, ExactlyTheBoundIsAccepted) {
  // 1000 elements with a bound of 1000; 1001 with the same bound fails.
  setenv("CREMA_MAX_BLOB_ELEMENTS", "1000", 1);
  const auto ok = RunCrema("inspect --model " + Write(InputNet("dim: 10 dim: 100")));
  EXPECT_EQ(ok.rc, 0) << ok.output;
  const auto bad = RunCrema("inspect --model " + Write(InputNet("dim: 7 dim: 11 dim: 13")));
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_TRUE(Contains(bad.output, "has 1001 elements, more than the bound of 1000")) << bad.output;
}

TEST_F(BlobBoundTest, MalformedBoundIsAConfigError) {
  setenv("CREMA_MAX_BLOB_ELEMENTS", "lots", 1);
  const auto r = RunCrema("inspect --model " + Write(InputNet("dim: 2")));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "CREMA_MAX_BLOB_ELEMENTS must be a positive integer")) << r.output;
}

}  // namespace
}  // namespace crema
