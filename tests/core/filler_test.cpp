#include "core/filler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/blob.hpp"
#include "crema/error.hpp"
#include "crema/proto.hpp"

namespace crema {
namespace {

template <typename T>
class FillerTest : public ::testing::Test {
 protected:
  void SetUp() override { SetRandomSeed(1701); }

  static FillerParameter Param(const std::string& type) {
    FillerParameter param;
    param.set_type(type);
    return param;
  }
  static std::vector<T> Fill(const FillerParameter& param, const std::vector<int>& shape) {
    Blob blob(shape, DataTypeOf<T>::value);
    FillBlob(param, &blob);
    const T* data = blob.cpu_data<T>();
    return std::vector<T>(data, data + blob.count());
  }
  static double Mean(const std::vector<T>& v) {
    double sum = 0;
    for (T x : v) sum += x;
    return sum / v.size();
  }
  static double Std(const std::vector<T>& v) {
    const double mean = Mean(v);
    double sum_sq = 0;
    for (T x : v) sum_sq += (x - mean) * (x - mean);
    return std::sqrt(sum_sq / v.size());
  }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FillerTest, FloatTypes);

TYPED_TEST(FillerTest, ConstantIsExact) {
  FillerParameter param = this->Param("constant");
  param.set_value(3.25f);
  for (TypeParam v : this->Fill(param, {2, 3, 4})) EXPECT_EQ(v, TypeParam(3.25));
  // The default type is constant with value 0.
  for (TypeParam v : this->Fill(FillerParameter(), {5})) EXPECT_EQ(v, TypeParam(0));
}

TYPED_TEST(FillerTest, UniformStaysInRangeWithTheRightMean) {
  FillerParameter param = this->Param("uniform");
  param.set_min(-2.f);
  param.set_max(5.f);
  const std::vector<TypeParam> v = this->Fill(param, {100, 1000});
  for (TypeParam x : v) {
    ASSERT_GE(x, TypeParam(-2));
    ASSERT_LE(x, TypeParam(5));
  }
  EXPECT_NEAR(this->Mean(v), 1.5, 0.03);
  EXPECT_NEAR(this->Std(v), 7.0 / std::sqrt(12.0), 0.03);
}

TYPED_TEST(FillerTest, GaussianMeanAndStd) {
  FillerParameter param = this->Param("gaussian");
  param.set_mean(0.5f);
  param.set_std(2.f);
  const std::vector<TypeParam> v = this->Fill(param, {100, 1000});
  EXPECT_NEAR(this->Mean(v), 0.5, 0.03);
  EXPECT_NEAR(this->Std(v), 2.0, 0.03);
}

TYPED_TEST(FillerTest, GaussianSparseZeroesTheExpectedFraction) {
  FillerParameter param = this->Param("gaussian");
  param.set_sparse(20);  // non-zero probability 20 / shape(0) = 0.2
  const std::vector<TypeParam> v = this->Fill(param, {100, 1000});
  int64_t zeros = 0;
  for (TypeParam x : v) zeros += x == TypeParam(0);
  EXPECT_NEAR(static_cast<double>(zeros) / v.size(), 0.8, 0.01);
  // sparse 0 zeroes everything.
  param.set_sparse(0);
  for (TypeParam x : this->Fill(param, {10, 10})) EXPECT_EQ(x, TypeParam(0));
}

TYPED_TEST(FillerTest, PositiveUnitballRowsAreOnTheSimplex) {
  const std::vector<int> shape = {10, 3, 4, 5};
  const std::vector<TypeParam> v = this->Fill(this->Param("positive_unitball"), shape);
  const int dim = 3 * 4 * 5;
  for (int row = 0; row < shape[0]; ++row) {
    double sum = 0;
    for (int j = 0; j < dim; ++j) {
      const TypeParam x = v[row * dim + j];
      EXPECT_GE(x, TypeParam(0));
      EXPECT_LE(x, TypeParam(1));
      sum += x;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << row;
  }
}

// A (64, 32, 3, 3) weight: fan_in = 32*3*3 = 288, fan_out = 64*3*3 = 576, average 432.
const std::vector<int> kWeightShape = {64, 32, 3, 3};
struct NormCase {
  FillerParameter::VarianceNorm norm;
  double n;
};
const NormCase kNormCases[] = {{FillerParameter::FAN_IN, 288},
                               {FillerParameter::FAN_OUT, 576},
                               {FillerParameter::AVERAGE, 432}};

TYPED_TEST(FillerTest, XavierRangeFollowsVarianceNorm) {
  for (const NormCase& c : kNormCases) {
    FillerParameter param = this->Param("xavier");
    param.set_variance_norm(c.norm);
    const double scale = std::sqrt(3.0 / c.n);
    const std::vector<TypeParam> v = this->Fill(param, kWeightShape);
    double max_abs = 0;
    for (TypeParam x : v) max_abs = std::max(max_abs, std::abs(static_cast<double>(x)));
    EXPECT_LE(max_abs, scale * (1 + 1e-6)) << "variance_norm " << c.norm;
    EXPECT_GE(max_abs, scale * 0.99) << "variance_norm " << c.norm;
    EXPECT_NEAR(this->Std(v), scale / std::sqrt(3.0), scale * 0.03) << "variance_norm " << c.norm;
  }
}

TYPED_TEST(FillerTest, MsraStdFollowsVarianceNorm) {
  for (const NormCase& c : kNormCases) {
    FillerParameter param = this->Param("msra");
    param.set_variance_norm(c.norm);
    const double std = std::sqrt(2.0 / c.n);
    const std::vector<TypeParam> v = this->Fill(param, kWeightShape);
    EXPECT_NEAR(this->Mean(v), 0.0, std * 0.03) << "variance_norm " << c.norm;
    EXPECT_NEAR(this->Std(v), std, std * 0.03) << "variance_norm " << c.norm;
  }
}

TYPED_TEST(FillerTest, XavierOnAOneAxisBlobUsesTheCount) {
  // fan_in = 1000 / 1000 = 1 (FAN_IN); fan_out falls back to the count for a 1-axis blob.
  FillerParameter param = this->Param("xavier");
  param.set_variance_norm(FillerParameter::FAN_OUT);
  double max_abs = 0;
  for (TypeParam x : this->Fill(param, {1000})) max_abs = std::max(max_abs, std::abs(double(x)));
  EXPECT_LE(max_abs, std::sqrt(3.0 / 1000) * (1 + 1e-6));
}

TYPED_TEST(FillerTest, BilinearMatchesItsFormula) {
  // Kernel 4 (upsampling factor 2): per-axis weights 1/4, 3/4, 3/4, 1/4.
  // Kernel 5 (factor 3): 1/3, 2/3, 1, 2/3, 1/3. The 2-D kernel is their outer product, the same
  // for every (num, channel) slice.
  const std::vector<std::vector<double>> profiles = {{0.25, 0.75, 0.75, 0.25},
                                                     {1 / 3.0, 2 / 3.0, 1.0, 2 / 3.0, 1 / 3.0}};
  for (const std::vector<double>& profile : profiles) {
    const int k = static_cast<int>(profile.size());
    const std::vector<TypeParam> v = this->Fill(this->Param("bilinear"), {2, 3, k, k});
    for (int slice = 0; slice < 6; ++slice) {
      for (int y = 0; y < k; ++y) {
        for (int x = 0; x < k; ++x) {
          EXPECT_NEAR(v[(slice * k + y) * k + x], profile[y] * profile[x], 1e-6)
              << "kernel " << k << " at " << y << "," << x;
        }
      }
    }
  }
}

TYPED_TEST(FillerTest, SameSeedSameValues) {
  for (const char* type : {"uniform", "gaussian", "xavier", "msra", "positive_unitball"}) {
    SetRandomSeed(42);
    const std::vector<TypeParam> first = this->Fill(this->Param(type), {8, 4, 3, 3});
    SetRandomSeed(42);
    const std::vector<TypeParam> second = this->Fill(this->Param(type), {8, 4, 3, 3});
    EXPECT_EQ(first, second) << type;
    SetRandomSeed(43);
    EXPECT_NE(first, this->Fill(this->Param(type), {8, 4, 3, 3})) << type;
  }
}

// Expects a ConfigError whose message starts with the context and contains `needle`.
void ExpectConfigError(const FillerParameter& param, const std::vector<int>& shape,
                       const std::string& needle) {
  Blob blob(shape);
  const std::string context = "net.prototxt:3:5: layer \"conv1\" (Convolution): ";
  try {
    FillBlob(param, &blob, context);
    ADD_FAILURE() << "no error for " << param.ShortDebugString();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(context, 0), 0u) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(FillerErrorTest, BadParametersAreConfigErrors) {
  FillerParameter param;
  param.set_type("gausian");
  ExpectConfigError(param, {2, 2}, "unknown filler type \"gausian\"");

  param = FillerParameter();
  param.set_type("uniform");
  param.set_min(1.f);
  param.set_max(0.f);
  ExpectConfigError(param, {2, 2}, "min must be <= max");

  param = FillerParameter();
  param.set_type("gaussian");
  param.set_std(0.f);
  ExpectConfigError(param, {2, 2}, "std must be > 0");

  param = FillerParameter();
  param.set_type("gaussian");
  param.set_sparse(-2);
  ExpectConfigError(param, {2, 2}, "sparse must be >= -1");

  param.set_sparse(5);
  ExpectConfigError(param, {2, 2}, "must not exceed the number of outputs");

  param = FillerParameter();
  param.set_type("xavier");
  param.set_sparse(3);
  ExpectConfigError(param, {4, 4}, "sparse is only supported by the gaussian filler");

  param = FillerParameter();
  param.set_type("bilinear");
  ExpectConfigError(param, {1, 1, 3, 4}, "square");
  ExpectConfigError(param, {1, 4, 4}, "4-axis");
}

}  // namespace
}  // namespace crema
