#include "math/im2col.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.hpp"
#include "math/math.hpp"

namespace crema::cpu {
namespace {

struct ConvCase {
  int channels, height, width;
  int kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int OutputH() const {
    return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1;
  }
  int OutputW() const {
    return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1;
  }
  int ImageSize() const { return channels * height * width; }
  int ColSize() const { return channels * kernel_h * kernel_w * OutputH() * OutputW(); }
};

const ConvCase kCases[] = {
    {1, 5, 5, 3, 3, 0, 0, 1, 1, 1, 1},  // plain
    {2, 6, 7, 3, 2, 1, 0, 2, 1, 1, 1},  // pad, stride, non-square kernel and image
    {3, 9, 8, 3, 3, 2, 1, 1, 2, 2, 3},  // dilation with padding
    {2, 4, 4, 1, 1, 0, 0, 1, 1, 1, 1},  // 1x1
    {1, 7, 6, 2, 3, 1, 2, 3, 2, 2, 1},  // stride larger than the kernel, mixed padding
    {2, 1, 3, 3, 3, 2, 2, 4, 4, 1, 1},  // whole kernel rows and columns in the padding
    // Rows copied whole and in pieces of every length the row copy splits (8 and the overlapping
    // last piece, 4, 2, 1), with and without padding columns.
    {2, 12, 12, 5, 5, 0, 0, 1, 1, 1, 1},  // LeNet's conv2: rows of 8
    {1, 6, 23, 3, 3, 0, 0, 1, 1, 1, 1},   // rows of 21: two pieces of 8 and an overlapping one
    {1, 5, 11, 3, 3, 0, 0, 1, 1, 1, 1},   // rows of 9
    {1, 4, 8, 2, 2, 0, 1, 1, 1, 1, 1},    // rows of 9 with a padding column at each end
    {1, 4, 7, 2, 2, 0, 0, 1, 1, 1, 1},    // rows of 6
    {1, 4, 4, 2, 2, 0, 0, 1, 1, 1, 1},    // rows of 3
    {1, 3, 2, 2, 2, 0, 0, 1, 1, 1, 1},    // rows of 1
};

template <typename T>
class Im2colTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Im2colTest, FloatTypes);

template <typename T>
std::vector<T> RandomVector(size_t n) {
  std::vector<T> v(n);
  RngUniform<T>(static_cast<int64_t>(n), T(-1), T(1), v.data());
  return v;
}

template <typename T>
void Im2colCase(const ConvCase& p, const T* im, T* col) {
  Im2col<T>(im, p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w, p.stride_h,
            p.stride_w, p.dilation_h, p.dilation_w, col);
}

template <typename T>
void Col2imCase(const ConvCase& p, const T* col, T* im) {
  Col2im<T>(col, p.channels, p.height, p.width, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w,
            p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, im);
}

// Convolution through im2col + Gemm must equal convolution summed straight from its definition.
TYPED_TEST(Im2colTest, ConvolutionMatchesDirectComputation) {
  using T = TypeParam;
  SetRandomSeed(10);
  const int num_output = 3;
  for (const ConvCase& p : kCases) {
    const int kernel_dim = p.channels * p.kernel_h * p.kernel_w;
    const int out_h = p.OutputH(), out_w = p.OutputW();
    const std::vector<T> image = RandomVector<T>(p.ImageSize());
    const std::vector<T> weight = RandomVector<T>(num_output * kernel_dim);
    // Im2col must write every element, padding included: start from garbage.
    std::vector<T> col(p.ColSize(), T(7));
    Im2colCase<T>(p, image.data(), col.data());
    std::vector<T> output(num_output * out_h * out_w);
    Gemm<T>(Trans::kNo, Trans::kNo, num_output, out_h * out_w, kernel_dim, T(1), weight.data(),
            col.data(), T(0), output.data());

    for (int o = 0; o < num_output; ++o) {
      for (int oh = 0; oh < out_h; ++oh) {
        for (int ow = 0; ow < out_w; ++ow) {
          T expected = 0;
          for (int c = 0; c < p.channels; ++c) {
            for (int kh = 0; kh < p.kernel_h; ++kh) {
              for (int kw = 0; kw < p.kernel_w; ++kw) {
                const int h = oh * p.stride_h - p.pad_h + kh * p.dilation_h;
                const int w = ow * p.stride_w - p.pad_w + kw * p.dilation_w;
                if (h < 0 || h >= p.height || w < 0 || w >= p.width) continue;
                expected += weight[((o * p.channels + c) * p.kernel_h + kh) * p.kernel_w + kw] *
                            image[(c * p.height + h) * p.width + w];
              }
            }
          }
          EXPECT_NEAR(output[(o * out_h + oh) * out_w + ow], expected, T(1e-5))
              << "case channels " << p.channels << " kernel " << p.kernel_h << "x" << p.kernel_w;
        }
      }
    }
  }
}

// <im2col(x), y> == <x, col2im(y)>: col2im is the adjoint, which is what backward relies on.
TYPED_TEST(Im2colTest, Col2imIsTheAdjoint) {
  using T = TypeParam;
  SetRandomSeed(11);
  for (const ConvCase& p : kCases) {
    const std::vector<T> x = RandomVector<T>(p.ImageSize());
    const std::vector<T> y = RandomVector<T>(p.ColSize());
    std::vector<T> col(p.ColSize());
    Im2colCase<T>(p, x.data(), col.data());
    // Garbage in the image buffer: col2im must overwrite it, not add to it.
    std::vector<T> im(p.ImageSize(), T(123));
    Col2imCase<T>(p, y.data(), im.data());
    const T lhs = Dot<T>(p.ColSize(), col.data(), y.data());
    const T rhs = Dot<T>(p.ImageSize(), x.data(), im.data());
    EXPECT_NEAR(lhs, rhs, T(1e-4)) << "case channels " << p.channels;
  }
}

TYPED_TEST(Im2colTest, PaddingReadsAsZero) {
  using T = TypeParam;
  const ConvCase p = {1, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1};
  const std::vector<T> image = {1, 2, 3, 4};
  std::vector<T> col(p.ColSize());
  Im2colCase<T>(p, image.data(), col.data());
  // Kernel row 0, column 0 looks up-left of each output: only output (1, 1) sees pixel 1.
  EXPECT_EQ(std::vector<T>(col.begin(), col.begin() + 4), (std::vector<T>{0, 0, 0, 1}));
  // The centre tap sees the image itself.
  EXPECT_EQ(std::vector<T>(col.begin() + 16, col.begin() + 20), image);
}

TYPED_TEST(Im2colTest, NdWithTwoSpatialAxesEqualsTwoD) {
  using T = TypeParam;
  SetRandomSeed(12);
  for (const ConvCase& p : kCases) {
    const int im_shape[] = {p.channels, p.height, p.width};
    const int col_shape[] = {p.channels * p.kernel_h * p.kernel_w, p.OutputH(), p.OutputW()};
    const int kernel[] = {p.kernel_h, p.kernel_w};
    const int pad[] = {p.pad_h, p.pad_w};
    const int stride[] = {p.stride_h, p.stride_w};
    const int dilation[] = {p.dilation_h, p.dilation_w};

    const std::vector<T> image = RandomVector<T>(p.ImageSize());
    std::vector<T> col_2d(p.ColSize()), col_nd(p.ColSize(), T(7));
    Im2colCase<T>(p, image.data(), col_2d.data());
    Im2colNd<T>(image.data(), 2, im_shape, col_shape, kernel, pad, stride, dilation, col_nd.data());
    EXPECT_EQ(col_nd, col_2d);

    const std::vector<T> col = RandomVector<T>(p.ColSize());
    std::vector<T> im_2d(p.ImageSize()), im_nd(p.ImageSize(), T(7));
    Col2imCase<T>(p, col.data(), im_2d.data());
    Col2imNd<T>(col.data(), 2, im_shape, col_shape, kernel, pad, stride, dilation, im_nd.data());
    for (int i = 0; i < p.ImageSize(); ++i) EXPECT_NEAR(im_nd[i], im_2d[i], T(1e-6));
  }
}

TYPED_TEST(Im2colTest, NdThreeSpatialAxesIsTheAdjoint) {
  using T = TypeParam;
  SetRandomSeed(13);
  const int im_shape[] = {2, 4, 5, 3};
  const int kernel[] = {2, 3, 2};
  const int pad[] = {1, 0, 1};
  const int stride[] = {1, 2, 1};
  const int dilation[] = {2, 1, 1};
  int col_shape[4] = {2 * 2 * 3 * 2, 0, 0, 0};
  int col_size = col_shape[0];
  for (int d = 0; d < 3; ++d) {
    col_shape[d + 1] =
        (im_shape[d + 1] + 2 * pad[d] - (dilation[d] * (kernel[d] - 1) + 1)) / stride[d] + 1;
    col_size *= col_shape[d + 1];
  }
  const int im_size = 2 * 4 * 5 * 3;
  const std::vector<T> x = RandomVector<T>(im_size);
  const std::vector<T> y = RandomVector<T>(col_size);
  std::vector<T> col(col_size), im(im_size, T(5));
  Im2colNd<T>(x.data(), 3, im_shape, col_shape, kernel, pad, stride, dilation, col.data());
  Col2imNd<T>(y.data(), 3, im_shape, col_shape, kernel, pad, stride, dilation, im.data());
  EXPECT_NEAR(Dot<T>(col_size, col.data(), y.data()), Dot<T>(im_size, x.data(), im.data()),
              T(1e-4));
  // Spot check one element against the definition: channel 1, kernel tap (1, 2, 0), output
  // (1, 0, 1) reads image (1, 1*1 - 1 + 1*2, 0*2 - 0 + 2*1, 1*1 - 1 + 0) = (1, 2, 2, 0).
  const int c_col = ((1 * 2 + 1) * 3 + 2) * 2 + 0;
  const int index_col = ((c_col * col_shape[1] + 1) * col_shape[2] + 0) * col_shape[3] + 1;
  EXPECT_EQ(col[index_col], x[((1 * 4 + 2) * 5 + 2) * 3 + 0]);
}

}  // namespace
}  // namespace crema::cpu
