// ListedPath: root_folder + path as Caffe joins them; with path escape forbidden, absolute paths
// and ".." that climb above root_folder are ConfigErrors naming the list file and line.
#include "io/input_checks.hpp"

#include <gtest/gtest.h>

#include <string>

#include "crema/error.hpp"

namespace crema {
namespace {

class ListPathTest : public ::testing::Test {
 protected:
  void TearDown() override { SetForbidPathEscape(false); }
};

std::string ErrorOf(const std::string& root, const std::string& path) {
  try {
    ListedPath(root, path, "list.txt:7");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST_F(ListPathTest, AllowedByDefaultAndJoinedAsCaffe) {
  SetForbidPathEscape(false);
  EXPECT_EQ(ListedPath("imgs/", "../etc/passwd", "l:1"), "imgs/../etc/passwd");
  EXPECT_EQ(ListedPath("imgs/", "/abs.png", "l:1"), "imgs//abs.png");
  EXPECT_EQ(ListedPath("", "a/b.png", "l:1"), "a/b.png");
}

TEST_F(ListPathTest, InsidePathsPass) {
  SetForbidPathEscape(true);
  EXPECT_EQ(ListedPath("imgs/", "cat/1.png", "l:1"), "imgs/cat/1.png");
  EXPECT_EQ(ListedPath("imgs/", "cat/../dog/./2.png", "l:1"), "imgs/cat/../dog/./2.png");
  EXPECT_EQ(ListedPath("", "a.png", "l:1"), "a.png");
  // root_folder without a trailing '/': Caffe concatenates, so "/x" continues the folder name.
  EXPECT_EQ(ListedPath("imgs", "/x.png", "l:1"), "imgs/x.png");
  EXPECT_EQ(ErrorOf("imgs/", "a..b/c.png"), "");
}

TEST_F(ListPathTest, EscapesAreErrorsNamingListAndLine) {
  SetForbidPathEscape(true);
  const std::string absolute = ErrorOf("imgs/", "/etc/passwd");
  EXPECT_NE(absolute.find("list.txt:7: the absolute path '/etc/passwd'"), std::string::npos)
      << absolute;
  EXPECT_NE(absolute.find("root_folder 'imgs/'"), std::string::npos) << absolute;
  const std::string climbs = ErrorOf("imgs/", "cat/../../secret.png");
  EXPECT_NE(climbs.find("list.txt:7: the path 'cat/../../secret.png' leaves root_folder"),
            std::string::npos)
      << climbs;
  EXPECT_NE(ErrorOf("", "../x.png").find("the current folder"), std::string::npos);
  EXPECT_NE(ErrorOf("", "/x.png"), "");
  EXPECT_NE(ErrorOf("data/imgs", "/../x.png"), "");
  EXPECT_NE(ErrorOf("imgs/", ".."), "");
}

TEST(EncodedImageSizeTest, ReadsPngJpegAndBmpHeaders) {
  int64_t width = 0, height = 0;
  // PNG: signature, IHDR length 13, "IHDR", width 70000 and height 3 big-endian.
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\x01\x11\x70\0\0\0\x03", 24);
  ASSERT_TRUE(EncodedImageSize(png, &width, &height));
  EXPECT_EQ(width, 70000);
  EXPECT_EQ(height, 3);
  // JPEG: SOI, an APP0 segment of 16 bytes, then SOF2 (progressive): height 513, width 258.
  std::string jpeg("\xff\xd8\xff\xe0\0\x10", 6);
  jpeg += std::string(14, 'j');
  jpeg += std::string("\xff\xc2\0\x11\x08\x02\x01\x01\x02\x03", 10);
  ASSERT_TRUE(EncodedImageSize(jpeg, &width, &height));
  EXPECT_EQ(width, 258);
  EXPECT_EQ(height, 513);
  // Stray bytes before the frame marker (libjpeg skips them and decodes; found by the fuzzer):
  // the frame is still found.
  std::string sloppy("\xff\xd8\xff\xe0\0\x10", 6);
  sloppy += std::string(14, 'j') + "\x01\x00\x00garbage\xff\xff\xff\x00\x00";
  sloppy += std::string("\xff\xc0\0\x11\x08\x5b\x82\x62\x00\x03", 10);
  ASSERT_TRUE(EncodedImageSize(sloppy, &width, &height));
  EXPECT_EQ(width, 25088);
  EXPECT_EQ(height, 23426);
  // BMP: width 640 and height -480 (top-down) little-endian at offsets 18 and 22.
  std::string bmp(26, '\0');
  bmp[0] = 'B';
  bmp[1] = 'M';
  bmp[18] = static_cast<char>(0x80);
  bmp[19] = 0x02;
  const uint32_t minus_480 = static_cast<uint32_t>(-480);
  for (int i = 0; i < 4; ++i) bmp[22 + i] = static_cast<char>((minus_480 >> (8 * i)) & 0xff);
  ASSERT_TRUE(EncodedImageSize(bmp, &width, &height));
  EXPECT_EQ(width, 640);
  EXPECT_EQ(height, 480);
  EXPECT_FALSE(EncodedImageSize("GIF89a....", &width, &height));
  EXPECT_FALSE(EncodedImageSize(std::string("\xff\xd8\xff", 3), &width, &height));
}

TEST(EncodedImageSizeTest, HugeHeadersAreRefusedBeforeDecoding) {
  // 50000 x 50000 x 3 = 7.5e9 values: more than INT_MAX, the default bound.
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\xc3\x50\0\0\xc3\x50", 24);
  try {
    CheckEncodedImageSize(png, 3, "record 7");
    FAIL() << "not refused";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("record 7: the image header declares 50000 x 50000"),
              std::string::npos)
        << e.what();
  }
  png[18] = 0;  // 80 x 50000: fine
  png[19] = 0x50;
  EXPECT_NO_THROW(CheckEncodedImageSize(png, 3, "record 7"));
}

TEST(EncodedImageSizeTest, DicomIsRefusedBeforeDecoding) {
  // The DICOM Part 10 signature after its 128-byte preamble, then an element declaring 2 GB.
  std::string dicom(128, '\0');
  dicom += "DICM";
  dicom += std::string("\x02\x00\x10\x00OB\0\0\xff\xff\xff\x7f", 12);
  try {
    CheckEncodedImageSize(dicom, 3, "record 9");
    FAIL() << "not refused";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("record 9: DICOM images are not decoded"),
              std::string::npos)
        << e.what();
  }
  dicom[129] = 'X';  // no signature: left to the decoder
  EXPECT_NO_THROW(CheckEncodedImageSize(dicom, 3, "record 9"));
}

}  // namespace
}  // namespace crema
