// Blob (src/core/blob.cpp) on its own: shapes and counts, axis arithmetic, the legacy 4-D view,
// memory kept or reallocated by Reshape, the host-side arithmetic (Update, sums, scaling),
// sharing, copies across element types, and the BlobProto round trip with its errors.
#include "crema/blob.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"

namespace crema {
namespace {

void Fill(Blob* blob, const std::vector<double>& values, bool diff = false) {
  ASSERT_EQ(blob->count(), static_cast<int64_t>(values.size()));
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* out = diff ? blob->mutable_cpu_diff<T>() : blob->mutable_cpu_data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  });
}

std::vector<double> Data(const Blob& blob) {
  std::vector<double> values;
  for (int64_t i = 0; i < blob.count(); ++i) values.push_back(blob.data_at(i));
  return values;
}

std::vector<double> Diff(const Blob& blob) {
  std::vector<double> values;
  for (int64_t i = 0; i < blob.count(); ++i) values.push_back(blob.diff_at(i));
  return values;
}

TEST(Blob, ShapesAndCounts) {
  Blob empty;
  EXPECT_EQ(empty.count(), 0);
  EXPECT_EQ(empty.num_axes(), 0);
  EXPECT_EQ(empty.dtype(), DataType::kFloat32);

  Blob blob(std::vector<int>{2, 3, 4, 5});
  EXPECT_EQ(blob.count(), 120);
  EXPECT_EQ(blob.num_axes(), 4);
  EXPECT_EQ(blob.shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(blob.shape(-1), 5);
  EXPECT_EQ(blob.shape(1), 3);
  EXPECT_EQ(blob.count(1), 60);
  EXPECT_EQ(blob.count(1, 3), 12);
  EXPECT_EQ(blob.count(4), 1);
  EXPECT_EQ(blob.CanonicalAxisIndex(-4), 0);
  EXPECT_EQ(blob.CanonicalAxisIndex(3), 3);
  EXPECT_THROW(blob.CanonicalAxisIndex(4), ConfigError);
  EXPECT_THROW(blob.CanonicalAxisIndex(-5), ConfigError);
  EXPECT_EQ(blob.shape_string(), "2 3 4 5 (120)");

  Blob scalar(std::vector<int>{});
  EXPECT_EQ(scalar.count(), 1);  // a scalar holds one value
  EXPECT_EQ(scalar.shape_string(), "(1)");
  Blob zero(std::vector<int>{3, 0, 2});
  EXPECT_EQ(zero.count(), 0);
}

TEST(Blob, LegacyFourDimensionalView) {
  Blob blob(std::vector<int>{2, 3});
  EXPECT_EQ(blob.num(), 2);
  EXPECT_EQ(blob.channels(), 3);
  EXPECT_EQ(blob.height(), 1);  // missing trailing axes read as 1
  EXPECT_EQ(blob.width(), 1);
  Blob four(2, 3, 4, 5);
  EXPECT_EQ(four.shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(four.offset(1, 2, 3, 4), 119);
  EXPECT_EQ(four.offset(1), 60);
  EXPECT_EQ(four.offset(std::vector<int>{1, 1}), 80);
  Blob five(std::vector<int>{1, 1, 1, 1, 2});
  EXPECT_THROW(five.num(), ConfigError);
}

TEST(Blob, BadShapesAreConfigErrors) {
  Blob blob;
  EXPECT_THROW(blob.Reshape({2, -1}), ConfigError);
  EXPECT_THROW(blob.Reshape(std::vector<int>(Blob::kMaxAxes + 1, 1)), ConfigError);
  EXPECT_THROW(blob.Reshape({1 << 30, 1 << 30, 1 << 30}), ConfigError);  // overflows
  EXPECT_THROW(blob.Reshape({1 << 16, 1 << 16}), ConfigError);           // above INT_MAX
  BlobShape shape;
  shape.add_dim(int64_t{1} << 40);
  EXPECT_THROW(blob.Reshape(shape), ConfigError);
  // A failed Reshape leaves the blob as it was.
  blob.Reshape({2, 2});
  EXPECT_THROW(blob.Reshape({2, -2}), ConfigError);
  EXPECT_EQ(blob.shape(), (std::vector<int>{2, 2}));
}

TEST(Blob, ReshapeKeepsMemoryUnlessTheCountGrows) {
  Blob blob(std::vector<int>{2, 3});
  Fill(&blob, {1, 2, 3, 4, 5, 6});
  const float* before = blob.cpu_data<float>();
  blob.Reshape({3, 2});  // same count: same memory, same values
  EXPECT_EQ(blob.cpu_data<float>(), before);
  EXPECT_EQ(Data(blob), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  blob.Reshape({4});  // smaller: still the same memory
  EXPECT_EQ(blob.cpu_data<float>(), before);
  EXPECT_EQ(Data(blob), (std::vector<double>{1, 2, 3, 4}));
  blob.Reshape({2, 3});  // back within the capacity
  EXPECT_EQ(blob.cpu_data<float>(), before);
  blob.Reshape({7});  // beyond it: new, zeroed memory
  EXPECT_EQ(Data(blob), std::vector<double>(7, 0.0));
  Blob other(std::vector<int>{5, 1});
  blob.ReshapeLike(other);
  EXPECT_EQ(blob.shape(), (std::vector<int>{5, 1}));
}

TEST(Blob, ArithmeticOnTheHost) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    Blob blob(std::vector<int>{4}, dtype);
    Fill(&blob, {1, -2, 3, -4});
    Fill(&blob, {0.5, 0.5, -1, 2}, /*diff=*/true);
    EXPECT_EQ(blob.asum_data(), 10);
    EXPECT_EQ(blob.sumsq_data(), 30);
    EXPECT_EQ(blob.asum_diff(), 4);
    EXPECT_EQ(blob.sumsq_diff(), 5.5);
    blob.Update();  // data -= diff
    EXPECT_EQ(Data(blob), (std::vector<double>{0.5, -2.5, 4, -6}));
    blob.scale_data(2);
    EXPECT_EQ(Data(blob), (std::vector<double>{1, -5, 8, -12}));
    blob.scale_diff(-1);
    EXPECT_EQ(Diff(blob), (std::vector<double>{-0.5, -0.5, 1, -2}));
    blob.SetDataZero();
    EXPECT_EQ(Data(blob), std::vector<double>(4, 0.0));
    EXPECT_EQ(Diff(blob), (std::vector<double>{-0.5, -0.5, 1, -2}));
    blob.SetDiffZero();
    EXPECT_EQ(blob.asum_diff(), 0);
  }
  Blob empty;
  EXPECT_EQ(empty.asum_data(), 0);
  empty.Update();  // nothing to do
}

TEST(Blob, SharingAndCopies) {
  Blob a(std::vector<int>{2, 2}), b({4});
  Fill(&a, {1, 2, 3, 4});
  b.ShareData(a);
  EXPECT_EQ(b.cpu_data<float>(), a.cpu_data<float>());
  a.mutable_cpu_data<float>()[0] = 9;
  EXPECT_EQ(b.data_at(0), 9);
  b.ShareDiff(a);
  a.mutable_cpu_diff<float>()[3] = 7;
  EXPECT_EQ(b.diff_at(3), 7);

  // Copies convert the element type; a shape mismatch needs `reshape`.
  Blob wide(std::vector<int>{2, 2}, DataType::kFloat64);
  wide.CopyFrom(a);
  EXPECT_EQ(Data(wide), (std::vector<double>{9, 2, 3, 4}));
  wide.CopyFrom(a, /*copy_diff=*/true);
  EXPECT_EQ(Diff(wide), (std::vector<double>{0, 0, 0, 7}));
  Blob other_shape(std::vector<int>{3});
  EXPECT_THROW(other_shape.CopyFrom(a), ConfigError);
  other_shape.CopyFrom(a, false, /*reshape=*/true);
  EXPECT_EQ(other_shape.shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(Data(other_shape), (std::vector<double>{9, 2, 3, 4}));

  // set_dtype changes the type and drops the contents.
  Blob typed(std::vector<int>{3});
  Fill(&typed, {1, 2, 3});
  typed.set_dtype(DataType::kFloat64);
  EXPECT_EQ(typed.dtype(), DataType::kFloat64);
  EXPECT_EQ(typed.count(), 3);
  EXPECT_EQ(SizeOf(DataType::kFloat64), 8u);
  EXPECT_STREQ(DataTypeName(DataType::kFloat16), "float16");
}

// A gradient zeroed lazily (Net::ClearParamDiffs) reads as zeros through every accessor, also
// through a blob sharing it; a writer that adds (mutable_cpu_diff_to_add) is told to overwrite
// once, and adds after that; the buffer is never written with the zeros it skips.
TEST(Blob, LazilyZeroedDiffs) {
  Blob a(std::vector<int>{4}), shared(std::vector<int>{4});
  Fill(&a, {1, 2, 3, 4}, /*diff=*/true);
  shared.ShareDiff(a);
  const uint64_t before = a.diff()->generation();
  a.SetDiffZeroLazily();
  EXPECT_NE(a.diff()->generation(), before);
  bool zero = false;
  float* diff = shared.mutable_cpu_diff_to_add<float>(&zero);
  EXPECT_TRUE(zero);
  EXPECT_EQ(diff[0], 1.f);  // the old value is there: nothing wrote the zeros
  for (int i = 0; i < 4; ++i) diff[i] = static_cast<float>(10 + i);  // the writer overwrites
  EXPECT_EQ(a.mutable_cpu_diff_to_add<float>(&zero), diff);
  EXPECT_FALSE(zero);  // a second writer adds
  EXPECT_EQ(Diff(a), (std::vector<double>{10, 11, 12, 13}));

  // Read before any writer: zeros, and the next writer adds into them.
  a.SetDiffZeroLazily();
  EXPECT_EQ(Diff(shared), (std::vector<double>{0, 0, 0, 0}));
  a.mutable_cpu_diff_to_add<float>(&zero);
  EXPECT_FALSE(zero);
  a.SetDiffZeroLazily();
  EXPECT_EQ(a.asum_diff(), 0);
  // A buffer never touched is allocated for the writer without being zeroed first.
  Blob fresh(std::vector<int>{3});
  fresh.SetDiffZeroLazily();
  fresh.mutable_cpu_diff_to_add<float>(&zero);
  EXPECT_TRUE(zero);
}
TEST(BlobDeathTest, TypedAccessOfTheWrongTypeIsABug) {
  Blob blob(std::vector<int>{2}, DataType::kFloat64);
  EXPECT_DEATH(blob.cpu_data<float>(), "blob holds float64 but float32 was requested");
}

TEST(Blob, ProtoRoundTrip) {
  Blob f(std::vector<int>{2, 3});
  Fill(&f, {1, 2, 3, 4, 5, 6});
  Fill(&f, {6, 5, 4, 3, 2, 1}, true);
  BlobProto proto;
  f.ToProto(&proto);
  EXPECT_EQ(proto.shape().dim_size(), 2);
  EXPECT_EQ(proto.data_size(), 6);
  EXPECT_EQ(proto.diff_size(), 0);  // diffs only when asked
  EXPECT_EQ(proto.double_data_size(), 0);
  f.ToProto(&proto, /*write_diff=*/true);
  EXPECT_EQ(proto.diff_size(), 6);
  EXPECT_TRUE(f.ShapeEquals(proto));

  Blob back(DataType::kFloat64);
  back.FromProto(proto);
  EXPECT_EQ(back.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(Data(back), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Diff(back), (std::vector<double>{6, 5, 4, 3, 2, 1}));
  // float64 blobs write double_data, which wins over data when reading.
  back.ToProto(&proto);
  EXPECT_EQ(proto.double_data_size(), 6);
  EXPECT_EQ(proto.data_size(), 0);
  proto.add_data(99);
  Blob from_double;
  from_double.FromProto(proto);
  EXPECT_EQ(Data(from_double), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Blob, LegacyProtoShapeAndErrors) {
  BlobProto legacy;
  legacy.set_num(1);
  legacy.set_channels(2);
  legacy.set_height(1);
  legacy.set_width(2);
  for (int i = 0; i < 4; ++i) legacy.add_data(static_cast<float>(i));
  Blob blob;
  blob.FromProto(legacy);
  EXPECT_EQ(blob.shape(), (std::vector<int>{1, 2, 1, 2}));
  Blob flat(std::vector<int>{2, 2});
  EXPECT_FALSE(flat.ShapeEquals(legacy));
  Blob leading(std::vector<int>{2, 1, 2});  // the legacy view pads missing leading axes with 1
  EXPECT_TRUE(leading.ShapeEquals(legacy));
  // Without reshape, a different shape is a ConfigError naming both.
  try {
    flat.FromProto(legacy, /*reshape=*/false);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the file has (1, 2, 1, 2) but the net expects (2, 2)"),
              std::string::npos)
        << e.what();
  }
  // Values that do not fill the shape.
  BlobProto short_data;
  short_data.mutable_shape()->add_dim(3);
  short_data.add_data(1);
  EXPECT_THROW(blob.FromProto(short_data), ConfigError);
  // No values at all: the shape only (a net's parameter without its weights).
  BlobProto shape_only;
  shape_only.mutable_shape()->add_dim(3);
  blob.FromProto(shape_only);
  EXPECT_EQ(blob.shape(), (std::vector<int>{3}));
}

}  // namespace
}  // namespace crema
