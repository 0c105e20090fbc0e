#include "layers/spp/spp_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    SPP, LayerCase("spp_param { pyramid_height: 2 }", {{2, 3, 8, 8}}).Name("max2"),
    LayerCase("spp_param { pyramid_height: 3 pool: AVE }", {{2, 2, 9, 7}}).Name("ave3"),
    LayerCase("spp_param { pyramid_height: 3 pool: MAX }", {{1, 2, 6, 7}}).Name("max3_padded"),
    LayerCase("spp_param { pyramid_height: 1 }", {{2, 3, 5, 4}}).Name("max1"),
    LayerCase("spp_param { pyramid_height: 1 pool: AVE }", {{2, 3, 3, 2}}).Name("ave1"),
    LayerCase("spp_param { pyramid_height: 2 pool: STOCHASTIC }", {{2, 2, 4, 4}})
        .Range(0.1, 1)
        .Phase(TEST)
        .Name("stochastic_test"));

namespace crema {
namespace {

using testing::ExpectSetUpError;
using testing::RunZooCase;
using testing::ZooCase;

std::unique_ptr<Layer> MakeSpp(const std::string& body, Blob* bottom, Blob* top,
                               DataType dtype = DataType::kFloat64) {
  auto layer = testing::CreateLayer("type: 'SPP' spp_param { " + body + " }", dtype);
  layer->SetUp({bottom}, {top});
  return layer;
}

// Two channels of 4 x 4: 0 .. 15 and 100 .. 115.
std::unique_ptr<Blob> Ramp() {
  std::vector<double> values;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 16; ++i) values.push_back(100 * c + i);
  return testing::MakeBlob({1, 2, 4, 4}, values);
}

TEST(SPPValues, LayoutIsConcatOfFlattenedLevels) {
  for (bool max : {true, false}) {
    auto bottom = Ramp();
    Blob top(DataType::kFloat64);
    auto layer =
        MakeSpp(StrCat("pyramid_height: 3 pool: ", max ? "MAX" : "AVE"), bottom.get(), &top);
    ASSERT_EQ(top.shape(), (std::vector<int>{1, 2 * (1 + 4 + 16)}));
    layer->Forward({bottom.get()}, {&top});
    std::vector<double> expected;
    for (int c = 0; c < 2; ++c) expected.push_back(100 * c + (max ? 15 : 7.5));
    for (int c = 0; c < 2; ++c)
      for (double v :
           max ? std::vector<double>{5, 7, 13, 15} : std::vector<double>{2.5, 4.5, 10.5, 12.5})
        expected.push_back(100 * c + v);
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 16; ++i) expected.push_back(100 * c + i);
    EXPECT_EQ(testing::DataOf(top), expected);
    // Backward: every level's gradient lands on the bottom and the levels add up.
    std::vector<double> ones(top.count(), 1.0);
    testing::SetDiffOf(&top, ones);
    layer->Backward({&top}, {true}, {bottom.get()});
    if (max) {
      // Cell 15 of each plane is the max of levels 0, 1 and 2; cell 5 of levels 1 and 2.
      EXPECT_EQ(bottom->diff_at(15), 3.0);
      EXPECT_EQ(bottom->diff_at(5), 2.0);
      EXPECT_EQ(bottom->diff_at(0), 1.0);
    } else {
      EXPECT_NEAR(bottom->diff_at(0), 1.0 / 16 + 1.0 / 4 + 1.0, 1e-15);
    }
  }
}

TEST(SPPValues, HeightOneKeepsFourAxes) {
  auto bottom = Ramp();
  Blob top(DataType::kFloat64);
  auto layer = MakeSpp("pyramid_height: 1 pool: AVE", bottom.get(), &top);
  ASSERT_EQ(top.shape(), (std::vector<int>{1, 2, 1, 1}));
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{7.5, 107.5}));
}

TEST(SPPValues, ReshapeFollowsTheImageSize) {
  Blob bottom(std::vector<int>{2, 3, 8, 8}, DataType::kFloat64), top(DataType::kFloat64);
  testing::FillUniform(&bottom, -1, 1);
  auto layer = MakeSpp("pyramid_height: 3", &bottom, &top);
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 63}));
  bottom.Reshape({3, 3, 13, 6});
  testing::FillUniform(&bottom, -1, 1);
  layer->Reshape({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{3, 63}));
  layer->Forward({&bottom}, {&top});
  // Level 0 is the global maximum of each plane.
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 3; ++c) {
      double m = -1e9;
      for (int i = 0; i < 78; ++i) m = std::max(m, bottom.data_at((n * 3 + c) * 78 + i));
      EXPECT_EQ(top.data_at(n * 63 + c), m);
    }
}

TEST(SPPErrors, Parameters) {
  ExpectSetUpError("type: 'SPP'", {{1, 2, 4, 4}}, "spp_param.pyramid_height");
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 0 }", {{1, 2, 4, 4}},
                   "spp_param.pyramid_height");
  // Level 2 of a 5 x 5 image: kernel 2, pad 2; Caffe's Pooling would abort.
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 3 }", {{1, 2, 5, 5}},
                   "spp_param.pyramid_height");
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 2 }", {{1, 2, 5}}, "4 axes");
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(SPPCaffe, Max) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"spp",
                          {{"fwd/071_eltwise_max__top0_eltwise_max.f32", {2, 6, 8, 8}}},
                          "fwd/083_spp__top0_spp.f32",
                          "bwd/122_head_concat__bottom1_spp.f32",
                          {"bwd/083_spp__bottom0_eltwise_max_eltwise_max_0_split_1.f32"},
                          {}});
}

TEST(SPPCaffe, Ave) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"spp_ave",
                          {{"fwd/061_scale_by_blob__top0_scale_by_blob.f32", {2, 4, 4, 4}}},
                          "fwd/084_spp_ave__top0_spp_ave.f32",
                          "bwd/122_head_concat__bottom3_spp_ave.f32",
                          {"bwd/084_spp_ave__bottom0_scale_by_blob.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
