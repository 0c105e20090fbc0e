#pragma once
// The layer conformance harness. One line per parameter mode:
//
//   CREMA_LAYER_CONFORMANCE(ReLU,
//       LayerCase("", {{2, 3, 4, 5}}).Kink(0.0),
//       LayerCase("relu_param { negative_slope: 0.1 }", {{2, 3, 4, 5}}).Kink(0.0));
//
// The first argument is the prototxt type; each LayerCase holds the text inside `layer { }`
// without `type` and the bottom shapes. For every case the suite ReLUConformance checks:
//   BuildsFromRegistry     the type is registered and the layer reports it;
//   ShapesAgree            float32 and float64 set-up give the same top shapes; Forward keeps them;
//   Gradient               numeric vs analytic gradient in float64 (gradient_checker.hpp);
//   Float32MatchesFloat64  forward and backward agree (relative Tolerance(), default 1e-5);
//   InPlace                when AllowsInPlace(): top[0] == bottom[0] gives the same top and
//                          bottom gradient as separate blobs;
//   ProtoRoundTrip         ToProto() -> a new layer from that proto gives the same output, and
//                          writes the same proto again (learned blobs carried);
//   CpuMatchesGpu          Device::Cuda(0) vs CPU in float32 (skipped without a GPU);
//   GpuInPlace             the same with top[0] == bottom[0] on the GPU (skipped without a GPU,
//                          GPU kernels or in-place use);
//   GpuGradient            the gradient check in float64 on Device::Cuda(0) (skipped without a
//                          GPU or when the layer has no GPU kernels).
// Inputs are deterministic: bottom i is uniform in Range() (default [-1, 1]) from seed 1701 + i,
// rounded to float so that float32 and float64 runs see the same values; Integer() bottoms hold
// labels. The random seed is reset before every SetUp and Forward, so learned blobs and dropout
// masks agree between runs; float64 and GPU runs also copy the float32 run's learned blobs.
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/device.hpp"
#include "crema/layer.hpp"
#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"

namespace crema::testing {

struct LayerCase {
  LayerCase(std::string param_text, std::vector<std::vector<int>> bottom_shapes)
      : param_text(std::move(param_text)), bottom_shapes(std::move(bottom_shapes)) {}

  // Skip gradient checks of inputs within `range` of `kink` (non-differentiable points).
  LayerCase& Kink(double value, double range = 1e-3) {
    kink = value;
    kink_range = range;
    return *this;
  }
  // Input values of the non-label bottoms: uniform in [lo, hi].
  LayerCase& Range(double lo, double hi) {
    range_lo = lo;
    range_hi = hi;
    return *this;
  }
  // Bottom `bottom` holds labels 0 .. num_classes - 1 and gets no gradient.
  LayerCase& Integer(int bottom, int num_classes) {
    integer_bottoms.push_back({bottom, num_classes});
    return NoGradient(bottom);
  }
  // Bottom `bottom` holds `values` (row-major) instead of random ones, e.g. sequence indicators.
  LayerCase& Values(int bottom, std::vector<double> values) {
    fixed_values.push_back({bottom, std::move(values)});
    return *this;
  }
  // LayerInstance::Forward runs Forward `n` times before the tops are compared, for layers that
  // carry state from one Forward to the next (RNN, LSTM). The gradient checks do not use it.
  LayerCase& Forwards(int n) {
    forwards = n;
    return *this;
  }
  LayerCase& NoGradient(int bottom) {
    no_gradient_bottoms.push_back(bottom);
    return *this;
  }
  LayerCase& Tops(int n) {
    num_tops = n;
    return *this;
  }
  LayerCase& Phase(::crema::Phase value) {
    phase = value;
    return *this;
  }
  LayerCase& Stepsize(double value) {
    stepsize = value;
    return *this;
  }
  LayerCase& Threshold(double value) {
    threshold = value;
    return *this;
  }
  LayerCase& MaxChecks(int value) {
    max_checks = value;
    return *this;
  }
  // Use CheckGradientEltwise (every element, two Forward passes per bottom).
  LayerCase& Eltwise() {
    eltwise = true;
    return *this;
  }
  // The layer has no meaningful gradient (e.g. it has no Backward); Gradient is skipped.
  LayerCase& NoGradientCheck() {
    gradient_check = false;
    return *this;
  }
  // Relative tolerance of float32 vs float64 (forward; backward uses 10x).
  LayerCase& Tolerance(double value) {
    tolerance = value;
    return *this;
  }
  // Relative tolerance of CPU vs GPU in float32.
  LayerCase& GpuTolerance(double value) {
    gpu_tolerance = value;
    return *this;
  }
  // A suffix for the gtest name of this case (letters, digits, '_').
  LayerCase& Name(std::string value) {
    name = std::move(value);
    return *this;
  }

  bool IsNoGradient(int bottom) const;
  // Number of classes of an Integer() bottom, or 0.
  int NumClasses(int bottom) const;
  // The Values() of a bottom, or null.
  const std::vector<double>* FixedValues(int bottom) const;
  GradientCheckOptions CheckOptions() const;

  std::string param_text;
  std::vector<std::vector<int>> bottom_shapes;
  double kink = 0.0;
  double kink_range = -1.0;
  double range_lo = -1.0;
  double range_hi = 1.0;
  std::vector<std::pair<int, int>> integer_bottoms;
  std::vector<std::pair<int, std::vector<double>>> fixed_values;
  int forwards = 1;
  std::vector<int> no_gradient_bottoms;
  int num_tops = 1;
  ::crema::Phase phase = ::crema::TRAIN;
  double stepsize = 1e-4;
  double threshold = 1e-5;
  int max_checks = 400;
  bool eltwise = false;
  bool gradient_check = true;
  double tolerance = 1e-5;
  double gpu_tolerance = 1e-5;
  std::string name;
};

void PrintTo(const LayerCase& c, std::ostream* os);
std::string LayerCaseName(const ::testing::TestParamInfo<LayerCase>& info);

// A layer built from the registry with its own bottoms (filled as described above) and tops,
// already SetUp. With in_place, top[0] is bottom[0].
struct LayerInstance {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> blobs;  // owns bottoms and tops
  BlobVec bottom;
  BlobVec top;
  int forwards = 1;  // LayerCase::Forwards
  // Forward with the random seed reset first (`forwards` times).
  void Forward();
  // Writes `weights` into the top diffs, zeroes bottom and param diffs (except bottoms that are
  // tops), and runs Backward for the case's gradient bottoms.
  void Backward(const LayerCase& c, const std::vector<std::vector<double>>& weights);
};

LayerParameter MakeLayerParam(const std::string& type, const LayerCase& c);
LayerInstance MakeLayer(const std::string& type, const LayerCase& c, DataType dtype,
                        const Device& device = Device::Cpu(), bool in_place = false);
LayerInstance MakeLayerFrom(const LayerParameter& param, const LayerCase& c, DataType dtype,
                            const Device& device = Device::Cpu(), bool in_place = false);
// Copies learned blob values from `from` to `to` (converting the element type).
void CopyParams(const Layer& from, Layer* to);
// Fixed top diffs for backward comparisons: loss weights for loss layers, else uniform noise.
std::vector<std::vector<double>> TopWeights(const LayerInstance& instance);
// EXPECTs |a - b| <= tolerance * max(|a|, |b|, 1) for every element of data (or diff).
void ExpectBlobsNear(const Blob& expected, const Blob& actual, double tolerance, bool diff,
                     const std::string& what);

// Small helpers for value tests.
// A blob of `shape` holding `values` (row-major; empty: zeros).
std::unique_ptr<Blob> MakeBlob(const std::vector<int>& shape, const std::vector<double>& values,
                               DataType dtype = DataType::kFloat64);
std::vector<double> DataOf(const Blob& blob);
std::vector<double> DiffOf(const Blob& blob);
void SetDiffOf(Blob* blob, const std::vector<double>& values);
// A layer from the text of a LayerParameter that names its type, with element type `dtype`.
std::unique_ptr<Layer> CreateLayer(const std::string& text, DataType dtype = DataType::kFloat64);

class LayerConformanceTest : public ::testing::TestWithParam<LayerCase> {
 protected:
  void Builds(const char* type);
  void Shapes(const char* type);
  void Gradient(const char* type);
  void Float32MatchesFloat64(const char* type);
  void InPlace(const char* type);
  void ProtoRoundTrip(const char* type);
  void CpuMatchesGpu(const char* type);
  void GpuInPlace(const char* type);
  void GpuGradient(const char* type);

 private:
  // Float32 on Device::Cuda(0) (in place: top[0] is bottom[0]) against the CPU, separate blobs.
  void ExpectGpuMatchesCpu(const char* type, bool gpu_in_place);
};

}  // namespace crema::testing

// Generates the suite <Type>Conformance with one instance per LayerCase. Use at namespace scope,
// once per type per file. Inside the arguments, LayerCase, TRAIN and TEST need no qualification.
#define CREMA_LAYER_CONFORMANCE(Type, ...)                                             \
  namespace crema_conformance_##Type {                                                 \
    using ::crema::TEST;                                                               \
    using ::crema::TRAIN;                                                              \
    using ::crema::testing::LayerCase;                                                 \
    class Type##Conformance : public ::crema::testing::LayerConformanceTest {};        \
    TEST_P(Type##Conformance, BuildsFromRegistry) { Builds(#Type); }                   \
    TEST_P(Type##Conformance, ShapesAgree) { Shapes(#Type); }                          \
    TEST_P(Type##Conformance, Gradient) { Gradient(#Type); }                           \
    TEST_P(Type##Conformance, Float32MatchesFloat64) { Float32MatchesFloat64(#Type); } \
    TEST_P(Type##Conformance, InPlace) { InPlace(#Type); }                             \
    TEST_P(Type##Conformance, ProtoRoundTrip) { ProtoRoundTrip(#Type); }               \
    TEST_P(Type##Conformance, CpuMatchesGpu) { CpuMatchesGpu(#Type); }                 \
    TEST_P(Type##Conformance, GpuInPlace) { GpuInPlace(#Type); }                       \
    TEST_P(Type##Conformance, GpuGradient) { GpuGradient(#Type); }                     \
    INSTANTIATE_TEST_SUITE_P(Cases, Type##Conformance,                                 \
                             ::testing::ValuesIn(std::vector<LayerCase>{__VA_ARGS__}), \
                             ::crema::testing::LayerCaseName);                         \
  }                                                                                    \
  static_assert(true, "")
