#include "io/npy.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "support/reference.hpp"

namespace crema {
namespace {

std::string Header(const std::string& dict) {
  std::string header = dict;
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

template <typename T>
std::string Payload(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string ErrorOf(const std::string& bytes) {
  try {
    ParseNpy(bytes, "x.npy");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, Float32RoundTrip) {
  const std::vector<float> values = {1.5f, -2.f, 3.25f, 0.f, 1e-7f, 42.f};
  const std::string bytes = NpyBytesFloat32({2, 3}, values.data());
  EXPECT_EQ(bytes.size() % 64, values.size() * 4 % 64);  // header padded to 64
  EXPECT_NE(bytes.find("'shape': (2, 3)"), std::string::npos);
  const NpyArray a = ParseNpy(bytes, "x.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.descr, "<f4");
  ASSERT_EQ(a.values.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(a.values[i], values[i]);
}

TEST(Npy, ScalarAndVectorShapes) {
  const float v[5] = {1, 2, 3, 4, 5};
  EXPECT_NE(NpyBytesFloat32({5}, v).find("'shape': (5,)"), std::string::npos);
  const NpyArray scalar = ParseNpy(NpyBytesFloat32({}, v), "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  ASSERT_EQ(scalar.values.size(), 1u);
  EXPECT_EQ(scalar.values[0], 1.0);
}

TEST(Npy, ReadsFloat64AndIntegers) {
  const std::vector<double> d = {0.1, -0.2, 1e300};
  NpyArray a = ParseNpy(
      Header("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }") + Payload(d), "d.npy");
  EXPECT_EQ(a.values, d);
  const std::vector<int64_t> i = {7, -3};
  a = ParseNpy(Header("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2), }") + Payload(i),
               "i.npy");
  EXPECT_EQ(a.values, (std::vector<double>{7, -3}));
}

TEST(Npy, IntoBlobReshapes) {
  const std::string dir = testing::TempDir();
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8};
  WriteNpyFloat32(dir + "/a.npy", {2, 2, 2}, values.data());
  Blob blob(std::vector<int>{1, 1});
  ReadNpyIntoBlob(dir + "/a.npy", &blob);
  EXPECT_EQ(blob.shape(), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(blob.data_at(7), 8.0);
  WriteBlobNpy(dir + "/b.npy", blob);
  EXPECT_EQ(ReadNpy(dir + "/b.npy").values, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Npy, ClearErrors) {
  const std::vector<float> f = {1, 2, 3, 4};
  EXPECT_NE(
      ErrorOf(Header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") + Payload(f))
          .find("Fortran"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(Header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }") + Payload(f))
          .find("unsupported dtype '<c8'"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(Header("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }") + Payload(f))
          .find("big-endian"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }") + Payload(f))
          .find("truncated"),
      std::string::npos);
  EXPECT_NE(ErrorOf("PK\x03\x04 not numpy at all").find("not a .npy file"), std::string::npos);
  EXPECT_NE(
      ErrorOf(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }").substr(0, 20))
          .find("truncated"),
      std::string::npos);
  EXPECT_THROW(ReadNpy("/nonexistent/x.npy"), RuntimeError);
}

}  // namespace
}  // namespace crema
