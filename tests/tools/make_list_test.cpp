// data/make_list.sh: a folder of class sub-folders -> a Caffe list file and a labels file; with
// the reference CIFAR-10 JPEGs (when present) the list goes through convert-imageset.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "support/reference.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

// Runs the script on `folder` with stdout to `list` (and stderr), returns the exit status.
CremaResult MakeList(const std::string& args, const std::string& list) {
  const std::string command = "bash '" + std::string(CREMA_SOURCE_DIR) + "/data/make_list.sh' " +
                              args + " > '" + list + "' 2>'" + list + ".err'";
  CremaResult result;
  const int status = std::system(command.c_str());
  result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.output = ReadFile(list + ".err");
  return result;
}

void Touch(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  WriteText(path, "x");
}

TEST(MakeListTest, ClassesSortedAndNumbered) {
  const std::string dir = TempDir();
  const std::string root = dir + "/images";
  // Created out of order; "Zebra" sorts before "ant" in byte order.
  Touch(root + "/dog/b.JPG");
  Touch(root + "/dog/a.png");
  Touch(root + "/dog/readme.txt");   // not an image: skipped
  Touch(root + "/dog/.hidden.jpg");  // hidden: skipped
  Touch(root + "/ant/deep/er/x.jpeg");
  Touch(root + "/ant/with space.png");
  Touch(root + "/Zebra/1.bmp");
  Touch(root + "/loose.jpg");  // not in a class folder: skipped
  std::filesystem::create_directories(root + "/empty");
  std::filesystem::create_directories(dir + "/lists");

  const CremaResult r = MakeList("'" + root + "/'", dir + "/lists/train.txt");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(ReadFile(dir + "/lists/train.txt"),
            "Zebra/1.bmp 0\n"
            "ant/deep/er/x.jpeg 1\n"
            "ant/with space.png 1\n"
            "dog/a.png 2\n"
            "dog/b.JPG 2\n");
  // The labels file beside the list: line i is the class of label i (empty classes count).
  EXPECT_EQ(ReadFile(dir + "/lists/labels.txt"), "Zebra\nant\ndog\nempty\n");
  EXPECT_NE(r.output.find("readme.txt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loose.jpg"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("class 3 'empty' has no images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("listed 5 images of 4 classes"), std::string::npos) << r.output;

  // --labels puts it elsewhere.
  const CremaResult other =
      MakeList("--labels '" + dir + "/names.txt' '" + root + "'", dir + "/lists/again.txt");
  ASSERT_EQ(other.rc, 0) << other.output;
  EXPECT_EQ(ReadFile(dir + "/names.txt"), "Zebra\nant\ndog\nempty\n");
  EXPECT_EQ(ReadFile(dir + "/lists/again.txt"), ReadFile(dir + "/lists/train.txt"));
}

TEST(MakeListTest, Errors) {
  const std::string dir = TempDir();
  CremaResult r = MakeList("'" + dir + "/missing'", dir + "/list.txt");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.output.find("is not a folder"), std::string::npos) << r.output;
  Touch(dir + "/flat/a.jpg");
  r = MakeList("'" + dir + "/flat'", dir + "/list.txt");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.output.find("no class sub-folders"), std::string::npos) << r.output;
  r = MakeList("", dir + "/list.txt");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.output.find("usage"), std::string::npos) << r.output;
}

#ifdef CREMA_WITH_OPENCV
TEST(MakeListTest, CifarJpegsThroughConvertImageset) {
  CREMA_REQUIRE_REFERENCE(tarball, "real/datasets/cifar10/cifar10_jpeg_train_test.tar.gz");
  const std::string dir = TempDir();
  // Two images each of three classes, in a folder of their own.
  const std::vector<std::string> members = {"test/airplane/0000.jpg", "test/airplane/0001.jpg",
                                            "test/cat/0000.jpg",      "test/cat/0001.jpg",
                                            "test/truck/0000.jpg",    "test/truck/0001.jpg"};
  std::string command = "tar -xzf '" + tarball + "' -C '" + dir + "'";
  for (const std::string& m : members) command += " '" + m + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  const CremaResult r = MakeList("'" + dir + "/test'", dir + "/list.txt");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(ReadFile(dir + "/list.txt"),
            "airplane/0000.jpg 0\nairplane/0001.jpg 0\ncat/0000.jpg 1\ncat/0001.jpg 1\n"
            "truck/0000.jpg 2\ntruck/0001.jpg 2\n");
  EXPECT_EQ(ReadFile(dir + "/labels.txt"), "airplane\ncat\ntruck\n");

  const CremaResult convert =
      RunCrema("convert-imageset '" + dir + "/test/' '" + dir + "/list.txt' '" + dir + "/db'");
  ASSERT_EQ(convert.rc, 0) << convert.output;
  const auto records = ReadDb(dir + "/db");
  ASSERT_EQ(records.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[i].second));
    EXPECT_EQ(records[i].first.substr(9), members[i].substr(5));
    EXPECT_EQ(datum.label(), i / 2);
    EXPECT_EQ(datum.channels(), 3);
    EXPECT_EQ(datum.height(), 32);
    EXPECT_EQ(datum.width(), 32);
  }
}
#endif

}  // namespace
}  // namespace crema::testing
