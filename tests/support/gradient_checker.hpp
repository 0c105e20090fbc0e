#pragma once
// The shared numeric gradient checker and input helpers of the layer tests.
//
// Objective: L = sum over tops t of <top_t.data, R_t>. For a layer with at least one loss top
// (loss(t) != 0 after SetUp), R_t is the top's loss weight, i.e. L is the layer's weighted loss,
// as in a net (a non-loss top of such a layer, e.g. SoftmaxWithLoss's probabilities, then gets
// R = 0). Otherwise each R_t is fixed uniform noise in [-1, 1]. The analytic gradient comes from
// Backward with top diff = R; the numeric one from central differences in float64, with the
// random seed reset before every Forward so stochastic layers (Dropout) are repeatable.
#include <cstdint>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/layer.hpp"
#include "crema/proto.hpp"

namespace crema::testing {

// Parses the text of a LayerParameter (protobuf text format), e.g.
// "name: 'r' type: 'ReLU' relu_param { negative_slope: 0.1 }". On a parse error the test fails
// with the parser's message and the call throws (ending the test).
LayerParameter ParseLayerParam(const std::string& text);

// Fills the data of `blob` with uniform values in [lo, hi] (or gaussian) drawn from `seed`; the
// values depend only on the seed and the count, not on the element type.
void FillUniform(Blob* blob, double lo, double hi, uint32_t seed = 1701);
void FillGaussian(Blob* blob, double mean, double stddev, uint32_t seed = 1701);
// Fills the data of `blob` with integers 0 .. num_classes - 1 (labels).
void FillInteger(Blob* blob, int num_classes, uint32_t seed = 1701);

struct GradientCheckOptions {
  double stepsize = 1e-4;    // central differences, in double precision
  double threshold = 1e-5;   // relative: |a-n| <= threshold * max(|a|,|n|,1)
  double kink = 0.0;         // skip elements within kink_range of kink (ReLU at 0 ...)
  double kink_range = -1.0;  // < 0: no kink skipping
  int max_checks = 400;      // at most this many elements sampled per blob (fixed seed)
  uint32_t seed = 1701;
  // Bottoms that get no gradient (labels): never perturbed, propagate_down false.
  std::vector<int> no_gradient_bottoms;
};

// Numeric gradient check. The layer must have been created with
// layer->set_dtype(DataType::kFloat64) and SetUp on float64 bottoms. check_bottom = -1: every
// bottom (except options.no_gradient_bottoms) and every param blob; otherwise that bottom only
// (params too when check_params). Failures (EXPECT_*) name the blob and element.
void CheckGradient(Layer* layer, const BlobVec& bottom, const BlobVec& top,
                   const GradientCheckOptions& options = {}, int check_bottom = -1,
                   bool check_params = true);

// For element-wise layers, where element j of every top depends only on element j of each
// bottom: checks every bottom element with two Forward passes per bottom (all elements moved at
// once). Param blobs, if any, are then checked as in CheckGradient.
void CheckGradientEltwise(Layer* layer, const BlobVec& bottom, const BlobVec& top,
                          const GradientCheckOptions& options = {});

// The objective above for the current top data and the given R (one vector per top).
double Objective(const BlobVec& top, const std::vector<std::vector<double>>& r);

}  // namespace crema::testing
