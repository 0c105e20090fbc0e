#include "layers/softmax_with_loss/softmax_with_loss_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    SoftmaxWithLoss, LayerCase("", {{4, 5, 2, 3}, {4, 1, 2, 3}}).Integer(1, 5),
    LayerCase("loss_param { normalization: FULL }", {{4, 5, 2, 3}, {4, 1, 2, 3}}).Integer(1, 5),
    LayerCase("loss_param { normalization: BATCH_SIZE }", {{4, 5, 2, 3}, {4, 2, 3}}).Integer(1, 5),
    LayerCase("loss_param { normalization: NONE }", {{4, 5}, {4}}).Integer(1, 5),
    LayerCase("loss_param { normalize: false }", {{4, 5, 2}, {4, 2}}).Integer(1, 5),
    LayerCase("loss_param { normalize: true }", {{4, 5, 2}, {4, 2}}).Integer(1, 5),
    LayerCase("loss_param { ignore_label: 2 }", {{4, 5, 2, 3}, {4, 1, 2, 3}}).Integer(1, 5),
    LayerCase("loss_param { ignore_label: 2 normalization: FULL }", {{4, 5, 2, 3}, {4, 2, 3}})
        .Integer(1, 5),
    LayerCase("softmax_param { axis: 2 }", {{4, 5, 2, 3}, {4, 5, 3}}).Integer(1, 2),
    LayerCase("softmax_param { axis: -1 }", {{3, 2, 6}, {3, 2}}).Integer(1, 6),
    LayerCase("loss_weight: 3", {{6, 4}, {6}}).Integer(1, 4).Range(-3, 3),
    LayerCase("loss_weight: 1 loss_weight: 0", {{4, 5, 2}, {4, 2}}).Integer(1, 5).Tops(2));

namespace crema::testing {
namespace {

using Norm = LossParameter::NormalizationMode;

struct Reference {
  double loss = 0;
  std::vector<double> diff;  // for loss weight 1
};

// Naive double loss and gradient, channels on axis 1 of (outer, C, inner).
Reference ReferenceLoss(int outer, int channels, int inner, const std::vector<double>& x,
                        const std::vector<double>& label, Norm norm, int ignore_label,
                        bool has_ignore) {
  Reference r;
  r.diff.assign(x.size(), 0);
  int valid = 0;
  double loss = 0;
  for (int o = 0; o < outer; ++o)
    for (int k = 0; k < inner; ++k) {
      double max_x = -1e300;
      for (int c = 0; c < channels; ++c) max_x = std::max(max_x, x[(o * channels + c) * inner + k]);
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += std::exp(x[(o * channels + c) * inner + k] - max_x);
      const int l = static_cast<int>(label[o * inner + k]);
      if (has_ignore && l == ignore_label) continue;
      ++valid;
      for (int c = 0; c < channels; ++c) {
        const int64_t j = (o * channels + c) * inner + k;
        const double p = std::exp(x[j] - max_x) / sum;
        r.diff[j] = p - (c == l);
        if (c == l) loss -= std::log(std::max(p, double(FLT_MIN)));
      }
    }
  double normalizer = 1;
  switch (norm) {
    case LossParameter::FULL:
      normalizer = outer * inner;
      break;
    case LossParameter::VALID:
      normalizer = valid;
      break;
    case LossParameter::BATCH_SIZE:
      normalizer = outer;
      break;
    case LossParameter::NONE:
      normalizer = 1;
      break;
  }
  normalizer = std::max(1.0, normalizer);
  r.loss = loss / normalizer;
  for (double& d : r.diff) d /= normalizer;
  return r;
}

struct NormCase {
  std::string param;
  Norm norm;
  bool has_ignore;
};

class SoftmaxWithLossValues : public ::testing::TestWithParam<NormCase> {};

TEST_P(SoftmaxWithLossValues, LossAndGradientMatchReference) {
  const NormCase& nc = GetParam();
  const int outer = 3, channels = 4, inner = 2;
  Blob x64({outer, channels, inner}, DataType::kFloat64);
  FillUniform(&x64, -2, 2, 11);
  const std::vector<double> x = DataOf(x64);
  const std::vector<double> label = {0, 3, 1, 1, 2, 1};  // label 1 is ignored where asked
  for (double loss_weight : {1.0, 0.5}) {
    auto layer =
        CreateLayer(StrCat("type: 'SoftmaxWithLoss' loss_weight: ", loss_weight, " ", nc.param));
    auto scores = MakeBlob({outer, channels, inner}, x);
    auto labels = MakeBlob({outer, inner}, label);
    Blob loss;
    layer->SetUp({scores.get(), labels.get()}, {&loss});
    ASSERT_EQ(loss.num_axes(), 0);
    const double weighted = layer->Forward({scores.get(), labels.get()}, {&loss});
    const Reference ref =
        ReferenceLoss(outer, channels, inner, x, label, nc.norm, 1, nc.has_ignore);
    EXPECT_NEAR(loss.data_at(0), ref.loss, 1e-12);
    EXPECT_NEAR(weighted, loss_weight * ref.loss, 1e-12);
    layer->Backward({&loss}, {true, false}, {scores.get(), labels.get()});
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(scores->diff_at(i), loss_weight * ref.diff[i], 1e-12) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, SoftmaxWithLossValues,
    ::testing::Values(
        NormCase{"", LossParameter::VALID, false},
        NormCase{"loss_param { normalization: FULL }", LossParameter::FULL, false},
        NormCase{"loss_param { normalization: BATCH_SIZE }", LossParameter::BATCH_SIZE, false},
        NormCase{"loss_param { normalization: NONE }", LossParameter::NONE, false},
        NormCase{"loss_param { normalize: false }", LossParameter::BATCH_SIZE, false},
        NormCase{"loss_param { normalize: true }", LossParameter::VALID, false},
        NormCase{"loss_param { normalize: false normalization: FULL }", LossParameter::FULL, false},
        NormCase{"loss_param { ignore_label: 1 }", LossParameter::VALID, true},
        NormCase{"loss_param { ignore_label: 1 normalization: FULL }", LossParameter::FULL, true},
        NormCase{"loss_param { ignore_label: 1 normalization: BATCH_SIZE }",
                 LossParameter::BATCH_SIZE, true}));

TEST(SoftmaxWithLossLayer, HandComputedTwoClasses) {
  // p = softmax(0, log 3) = (1/4, 3/4); label 1 -> loss = -log(3/4).
  auto layer = CreateLayer("type: 'SoftmaxWithLoss' loss_weight: 1 loss_weight: 0");
  auto scores = MakeBlob({1, 2}, {0, std::log(3.0)});
  auto labels = MakeBlob({1}, {1});
  Blob loss, prob;
  layer->SetUp({scores.get(), labels.get()}, {&loss, &prob});
  layer->Forward({scores.get(), labels.get()}, {&loss, &prob});
  EXPECT_NEAR(loss.data_at(0), -std::log(0.75), 1e-15);
  ASSERT_EQ(prob.shape(), (std::vector<int>{1, 2}));
  EXPECT_NEAR(prob.data_at(0), 0.25, 1e-15);
  EXPECT_NEAR(prob.data_at(1), 0.75, 1e-15);
  layer->Backward({&loss, &prob}, {true, false}, {scores.get(), labels.get()});
  EXPECT_NEAR(scores->diff_at(0), 0.25, 1e-15);
  EXPECT_NEAR(scores->diff_at(1), -0.25, 1e-15);
}

TEST(SoftmaxWithLossLayer, AllIgnoredGivesZeroLoss) {
  auto layer = CreateLayer("type: 'SoftmaxWithLoss' loss_param { ignore_label: 255 }");
  auto scores = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto labels = MakeBlob({2}, {255, 255});  // outside [0, 3) but ignored
  Blob loss;
  layer->SetUp({scores.get(), labels.get()}, {&loss});
  layer->Forward({scores.get(), labels.get()}, {&loss});
  EXPECT_EQ(loss.data_at(0), 0.0);
  layer->Backward({&loss}, {true, false}, {scores.get(), labels.get()});
  for (double d : DiffOf(*scores)) EXPECT_EQ(d, 0.0);
}

TEST(SoftmaxWithLossLayer, LabelOutOfRangeIsRuntimeError) {
  // NaN and values beyond int's range are out of range too (not class 0 or an ignored label).
  for (double bad : {3.0, -1.0, std::nan(""), 1e10, -4294967041.0}) {
    auto layer = CreateLayer("type: 'SoftmaxWithLoss' loss_param { ignore_label: 255 }");
    auto scores = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
    auto labels = MakeBlob({2}, {0, bad});
    Blob loss;
    layer->SetUp({scores.get(), labels.get()}, {&loss});
    EXPECT_THROW(layer->Forward({scores.get(), labels.get()}, {&loss}), RuntimeError) << bad;
  }
}

TEST(SoftmaxWithLossLayer, LabelCountMismatchIsConfigError) {
  auto layer = CreateLayer("type: 'SoftmaxWithLoss'");
  auto scores = MakeBlob({2, 3, 2}, {});
  auto labels = MakeBlob({2, 3}, {});
  Blob loss;
  EXPECT_THROW(layer->SetUp({scores.get(), labels.get()}, {&loss}), ConfigError);
}

TEST(SoftmaxWithLossLayer, TwoTopsNeedTwoLossWeights) {
  auto layer = CreateLayer("type: 'SoftmaxWithLoss'");
  auto scores = MakeBlob({2, 3}, {});
  auto labels = MakeBlob({2}, {});
  Blob loss, prob;
  EXPECT_THROW(layer->SetUp({scores.get(), labels.get()}, {&loss, &prob}), ConfigError);
}

TEST(SoftmaxWithLossLayer, NoGradientToLabels) {
  auto layer = CreateLayer("type: 'SoftmaxWithLoss'");
  auto scores = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto labels = MakeBlob({2}, {0, 1});
  Blob loss;
  layer->SetUp({scores.get(), labels.get()}, {&loss});
  layer->Forward({scores.get(), labels.get()}, {&loss});
  EXPECT_THROW(layer->Backward({&loss}, {true, true}, {scores.get(), labels.get()}), ConfigError);
  EXPECT_FALSE(layer->AllowForceBackward(1));
}

}  // namespace
}  // namespace crema::testing
