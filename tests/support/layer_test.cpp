#include "support/layer_test.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "core/rng.hpp"

namespace crema::testing {
namespace {

constexpr uint32_t kSeed = 1701;

// Bottom values: drawn in double, rounded to float, so every element type sees the same inputs.
void FillBottom(const LayerCase& c, int index, Blob* blob) {
  Blob values(blob->shape(), DataType::kFloat64);
  const int num_classes = c.NumClasses(index);
  if (const std::vector<double>* fixed = c.FixedValues(index)) {
    EXPECT_EQ(static_cast<int64_t>(fixed->size()), blob->count()) << "Values() of bottom " << index;
    double* data = values.mutable_cpu_data<double>();
    for (int64_t i = 0; i < values.count(); ++i)
      data[i] = i < static_cast<int64_t>(fixed->size()) ? (*fixed)[i] : 0.0;
  } else if (num_classes > 0)
    FillInteger(&values, num_classes, kSeed + index);
  else
    FillUniform(&values, c.range_lo, c.range_hi, kSeed + index);
  const double* source = values.cpu_data<double>();
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* data = blob->mutable_cpu_data<T>();
    for (int64_t i = 0; i < blob->count(); ++i)
      data[i] = static_cast<T>(static_cast<float>(source[i]));
  });
}

std::vector<bool> PropagateDown(const LayerCase& c, size_t num_bottoms) {
  std::vector<bool> propagate_down(num_bottoms);
  for (size_t i = 0; i < num_bottoms; ++i) propagate_down[i] = !c.IsNoGradient(int(i));
  return propagate_down;
}

bool HasGradientBottom(const LayerCase& c) {
  for (size_t i = 0; i < c.bottom_shapes.size(); ++i)
    if (!c.IsNoGradient(static_cast<int>(i))) return true;
  return false;
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

bool LayerCase::IsNoGradient(int bottom) const {
  return std::find(no_gradient_bottoms.begin(), no_gradient_bottoms.end(), bottom) !=
         no_gradient_bottoms.end();
}

int LayerCase::NumClasses(int bottom) const {
  for (const auto& [index, num_classes] : integer_bottoms)
    if (index == bottom) return num_classes;
  return 0;
}

const std::vector<double>* LayerCase::FixedValues(int bottom) const {
  for (const auto& [index, values] : fixed_values)
    if (index == bottom) return &values;
  return nullptr;
}

GradientCheckOptions LayerCase::CheckOptions() const {
  GradientCheckOptions options;
  options.stepsize = stepsize;
  options.threshold = threshold;
  options.kink = kink;
  options.kink_range = kink_range;
  options.max_checks = max_checks;
  options.seed = kSeed;
  options.no_gradient_bottoms = no_gradient_bottoms;
  return options;
}

void PrintTo(const LayerCase& c, std::ostream* os) {
  *os << "LayerCase(\"" << c.param_text << "\", {";
  for (size_t i = 0; i < c.bottom_shapes.size(); ++i)
    *os << (i ? ", " : "") << ShapeText(c.bottom_shapes[i]);
  *os << "}) tops " << c.num_tops << " phase " << (c.phase == TRAIN ? "TRAIN" : "TEST");
}

std::string LayerCaseName(const ::testing::TestParamInfo<LayerCase>& info) {
  std::string name = "c" + std::to_string(info.index);
  if (!info.param.name.empty()) {
    name += "_";
    for (char ch : info.param.name) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return name;
}

void LayerInstance::Forward() {
  for (int i = 0; i < forwards; ++i) {
    SetRandomSeed(kSeed);
    layer->Forward(bottom, top);
  }
}

void LayerInstance::Backward(const LayerCase& c, const std::vector<std::vector<double>>& weights) {
  for (Blob* b : bottom)
    if (std::find(top.begin(), top.end(), b) == top.end()) b->SetDiffZero();
  for (size_t i = 0; i < layer->blobs().size(); ++i) {
    layer->blobs()[i]->SetDiffZero();
    layer->set_param_propagate_down(static_cast<int>(i), true);
  }
  for (size_t t = 0; t < top.size(); ++t) {
    CREMA_DISPATCH_FLOAT(top[t]->dtype(), T, {
      T* diff = top[t]->mutable_cpu_diff<T>();
      for (int64_t i = 0; i < top[t]->count(); ++i) diff[i] = static_cast<T>(weights[t][i]);
    });
  }
  layer->Backward(top, PropagateDown(c, bottom.size()), bottom);
}

LayerParameter MakeLayerParam(const std::string& type, const LayerCase& c) {
  LayerParameter param = ParseLayerParam(c.param_text);
  param.set_type(type);
  if (!param.has_name()) param.set_name("test");
  param.set_phase(c.phase);
  return param;
}

LayerInstance MakeLayerFrom(const LayerParameter& param, const LayerCase& c, DataType dtype,
                            const Device& device, bool in_place) {
  LayerInstance instance;
  instance.forwards = c.forwards;
  instance.layer = LayerRegistry::Create(param);
  instance.layer->set_dtype(dtype);
  instance.layer->set_device(device);
  for (size_t i = 0; i < c.bottom_shapes.size(); ++i) {
    instance.blobs.push_back(std::make_unique<Blob>(c.bottom_shapes[i], dtype));
    FillBottom(c, static_cast<int>(i), instance.blobs.back().get());
    instance.bottom.push_back(instance.blobs.back().get());
  }
  for (int t = 0; t < c.num_tops; ++t) {
    if (in_place && t == 0 && !instance.bottom.empty()) {
      instance.top.push_back(instance.bottom[0]);
      continue;
    }
    instance.blobs.push_back(std::make_unique<Blob>(dtype));
    instance.top.push_back(instance.blobs.back().get());
  }
  SetRandomSeed(kSeed);
  instance.layer->SetUp(instance.bottom, instance.top);
  // Tops a layer leaves alone (Input's) must hold the same values in every run.
  for (size_t t = 0; t < instance.top.size(); ++t) {
    Blob* top = instance.top[t];
    if (std::find(instance.bottom.begin(), instance.bottom.end(), top) != instance.bottom.end())
      continue;
    Blob values(top->shape(), DataType::kFloat64);
    FillUniform(&values, -1, 1, kSeed + 1000 + static_cast<uint32_t>(t));
    CREMA_DISPATCH_FLOAT(top->dtype(), T, {
      T* data = top->mutable_cpu_data<T>();
      for (int64_t i = 0; i < top->count(); ++i)
        data[i] = static_cast<T>(static_cast<float>(values.data_at(i)));
    });
  }
  return instance;
}

LayerInstance MakeLayer(const std::string& type, const LayerCase& c, DataType dtype,
                        const Device& device, bool in_place) {
  return MakeLayerFrom(MakeLayerParam(type, c), c, dtype, device, in_place);
}

void CopyParams(const Layer& from, Layer* to) {
  ASSERT_EQ(from.blobs().size(), to->blobs().size()) << "learned blob counts differ";
  for (size_t i = 0; i < from.blobs().size(); ++i) {
    const Blob& source = *from.blobs()[i];
    Blob* target = to->blobs()[i].get();
    ASSERT_EQ(source.shape(), target->shape()) << "learned blob " << i << " shapes differ";
    CREMA_DISPATCH_FLOAT(target->dtype(), T, {
      T* data = target->mutable_cpu_data<T>();
      for (int64_t k = 0; k < target->count(); ++k) data[k] = static_cast<T>(source.data_at(k));
    });
  }
}

std::vector<std::vector<double>> TopWeights(const LayerInstance& instance) {
  bool has_loss = false;
  for (size_t t = 0; t < instance.top.size(); ++t) has_loss |= instance.layer->loss(int(t)) != 0;
  std::vector<std::vector<double>> weights(instance.top.size());
  for (size_t t = 0; t < instance.top.size(); ++t) {
    weights[t].resize(instance.top[t]->count());
    if (has_loss) {
      std::fill(weights[t].begin(), weights[t].end(), instance.layer->loss(int(t)));
    } else {
      std::mt19937 gen(kSeed + 31 * static_cast<uint32_t>(t));
      std::uniform_real_distribution<double> uniform(-1, 1);
      for (double& w : weights[t]) w = static_cast<float>(uniform(gen));
    }
  }
  return weights;
}

void ExpectBlobsNear(const Blob& expected, const Blob& actual, double tolerance, bool diff,
                     const std::string& what) {
  ASSERT_EQ(expected.shape(), actual.shape()) << what << ": shapes differ";
  int failures = 0;
  for (int64_t i = 0; i < expected.count(); ++i) {
    const double a = diff ? expected.diff_at(i) : expected.data_at(i);
    const double b = diff ? actual.diff_at(i) : actual.data_at(i);
    const double scale = std::max({std::fabs(a), std::fabs(b), 1.0});
    if (std::fabs(a - b) <= tolerance * scale) continue;
    if (++failures <= 10)
      ADD_FAILURE() << what << " element " << i << ": " << a << " vs " << b << " (tolerance "
                    << tolerance * scale << ")";
  }
  if (failures > 10) ADD_FAILURE() << what << ": " << failures << " mismatches in all";
}

std::unique_ptr<Blob> MakeBlob(const std::vector<int>& shape, const std::vector<double>& values,
                               DataType dtype) {
  auto blob = std::make_unique<Blob>(shape, dtype);
  EXPECT_TRUE(values.empty() || static_cast<int64_t>(values.size()) == blob->count())
      << values.size() << " values for shape " << blob->shape_string();
  CREMA_DISPATCH_FLOAT(dtype, T, {
    T* data = blob->mutable_cpu_data<T>();
    for (int64_t i = 0; i < blob->count(); ++i)
      data[i] = i < static_cast<int64_t>(values.size()) ? static_cast<T>(values[i]) : T(0);
  });
  return blob;
}

std::vector<double> DataOf(const Blob& blob) {
  std::vector<double> values(blob.count());
  for (int64_t i = 0; i < blob.count(); ++i) values[i] = blob.data_at(i);
  return values;
}

std::vector<double> DiffOf(const Blob& blob) {
  std::vector<double> values(blob.count());
  for (int64_t i = 0; i < blob.count(); ++i) values[i] = blob.diff_at(i);
  return values;
}

void SetDiffOf(Blob* blob, const std::vector<double>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), blob->count());
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* diff = blob->mutable_cpu_diff<T>();
    for (int64_t i = 0; i < blob->count(); ++i) diff[i] = static_cast<T>(values[i]);
  });
}

std::unique_ptr<Layer> CreateLayer(const std::string& text, DataType dtype) {
  LayerParameter param = ParseLayerParam(text);
  if (!param.has_name()) param.set_name("test");
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  layer->set_dtype(dtype);
  return layer;
}

void LayerConformanceTest::Builds(const char* type) {
  ASSERT_TRUE(LayerRegistry::Has(type)) << "layer type " << type << " is not registered";
  LayerInstance instance = MakeLayer(type, GetParam(), DataType::kFloat32);
  EXPECT_STREQ(instance.layer->type(), type);
  EXPECT_EQ(instance.layer->layer_param().type(), type);
}

void LayerConformanceTest::Shapes(const char* type) {
  const LayerCase& c = GetParam();
  LayerInstance f32 = MakeLayer(type, c, DataType::kFloat32);
  LayerInstance f64 = MakeLayer(type, c, DataType::kFloat64);
  ASSERT_EQ(f32.top.size(), f64.top.size());
  for (size_t t = 0; t < f32.top.size(); ++t) {
    EXPECT_EQ(f32.top[t]->shape(), f64.top[t]->shape()) << "top[" << t << "]";
    EXPECT_EQ(f32.top[t]->dtype(), DataType::kFloat32) << "top[" << t << "]";
    EXPECT_EQ(f64.top[t]->dtype(), DataType::kFloat64) << "top[" << t << "]";
  }
  ASSERT_EQ(f32.layer->blobs().size(), f64.layer->blobs().size());
  for (size_t i = 0; i < f32.layer->blobs().size(); ++i)
    EXPECT_EQ(f32.layer->blobs()[i]->shape(), f64.layer->blobs()[i]->shape()) << "param " << i;
  std::vector<std::vector<int>> shapes;
  for (Blob* t : f32.top) shapes.push_back(t->shape());
  f32.layer->Reshape(f32.bottom, f32.top);
  f32.Forward();
  for (size_t t = 0; t < f32.top.size(); ++t)
    EXPECT_EQ(f32.top[t]->shape(), shapes[t]) << "top[" << t << "] changed shape in Forward";
}

void LayerConformanceTest::Gradient(const char* type) {
  const LayerCase& c = GetParam();
  if (!c.gradient_check) GTEST_SKIP() << "gradient check disabled for this case";
  LayerInstance f64 = MakeLayer(type, c, DataType::kFloat64);
  if (!HasGradientBottom(c) && f64.layer->blobs().empty())
    GTEST_SKIP() << "no bottom or learned blob takes a gradient";
  if (c.eltwise)
    CheckGradientEltwise(f64.layer.get(), f64.bottom, f64.top, c.CheckOptions());
  else
    CheckGradient(f64.layer.get(), f64.bottom, f64.top, c.CheckOptions());
}

void LayerConformanceTest::GpuGradient(const char* type) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const LayerCase& c = GetParam();
  if (!c.gradient_check) GTEST_SKIP() << "gradient check disabled for this case";
  SetCudaDevice(0);
  LayerInstance f64 = MakeLayer(type, c, DataType::kFloat64, Device::Cuda(0));
  if (!f64.layer->HasGpuKernels()) GTEST_SKIP() << type << " has no GPU kernels (CPU fallback)";
  if (!HasGradientBottom(c) && f64.layer->blobs().empty())
    GTEST_SKIP() << "no bottom or learned blob takes a gradient";
  // The checker perturbs host copies; the layer reads them on the device (synced memory).
  if (c.eltwise)
    CheckGradientEltwise(f64.layer.get(), f64.bottom, f64.top, c.CheckOptions());
  else
    CheckGradient(f64.layer.get(), f64.bottom, f64.top, c.CheckOptions());
}

void LayerConformanceTest::Float32MatchesFloat64(const char* type) {
  const LayerCase& c = GetParam();
  LayerInstance f32 = MakeLayer(type, c, DataType::kFloat32);
  LayerInstance f64 = MakeLayer(type, c, DataType::kFloat64);
  CopyParams(*f32.layer, f64.layer.get());
  f32.Forward();
  f64.Forward();
  for (size_t t = 0; t < f32.top.size(); ++t)
    ExpectBlobsNear(*f64.top[t], *f32.top[t], c.tolerance, false, StrCat("forward top[", t, "]"));
  if (!HasGradientBottom(c) && f32.layer->blobs().empty()) return;
  const auto weights = TopWeights(f32);
  f32.Backward(c, weights);
  f64.Backward(c, weights);
  for (size_t i = 0; i < f32.bottom.size(); ++i)
    if (!c.IsNoGradient(static_cast<int>(i)))
      ExpectBlobsNear(*f64.bottom[i], *f32.bottom[i], 10 * c.tolerance, true,
                      StrCat("backward bottom[", i, "] diff"));
  for (size_t i = 0; i < f32.layer->blobs().size(); ++i)
    ExpectBlobsNear(*f64.layer->blobs()[i], *f32.layer->blobs()[i], 10 * c.tolerance, true,
                    StrCat("backward param[", i, "] diff"));
}

void LayerConformanceTest::InPlace(const char* type) {
  const LayerCase& c = GetParam();
  {
    LayerInstance probe = MakeLayer(type, c, DataType::kFloat64);
    if (!probe.layer->AllowsInPlace()) GTEST_SKIP() << type << " does not allow in-place use";
  }
  ASSERT_FALSE(c.bottom_shapes.empty());
  LayerInstance separate = MakeLayer(type, c, DataType::kFloat64);
  LayerInstance in_place = MakeLayer(type, c, DataType::kFloat64, Device::Cpu(), true);
  ASSERT_EQ(in_place.top[0], in_place.bottom[0]);
  CopyParams(*separate.layer, in_place.layer.get());
  separate.Forward();
  in_place.Forward();
  for (size_t t = 0; t < separate.top.size(); ++t)
    ExpectBlobsNear(*separate.top[t], *in_place.top[t], 1e-12, false,
                    StrCat("in-place forward top[", t, "]"));
  if (!HasGradientBottom(c) && separate.layer->blobs().empty()) return;
  const auto weights = TopWeights(separate);
  separate.Backward(c, weights);
  in_place.Backward(c, weights);
  for (size_t i = 0; i < separate.bottom.size(); ++i)
    if (!c.IsNoGradient(static_cast<int>(i)))
      ExpectBlobsNear(*separate.bottom[i], *in_place.bottom[i], 1e-12, true,
                      StrCat("in-place backward bottom[", i, "] diff"));
  for (size_t i = 0; i < separate.layer->blobs().size(); ++i)
    ExpectBlobsNear(*separate.layer->blobs()[i], *in_place.layer->blobs()[i], 1e-12, true,
                    StrCat("in-place backward param[", i, "] diff"));
}

void LayerConformanceTest::ProtoRoundTrip(const char* type) {
  const LayerCase& c = GetParam();
  LayerInstance original = MakeLayer(type, c, DataType::kFloat32);
  original.Forward();
  LayerParameter proto;
  original.layer->ToProto(&proto);
  EXPECT_EQ(proto.type(), type);
  ASSERT_EQ(proto.blobs_size(), static_cast<int>(original.layer->blobs().size()));
  LayerInstance restored = MakeLayerFrom(proto, c, DataType::kFloat32);
  ASSERT_EQ(restored.layer->blobs().size(), original.layer->blobs().size());
  for (size_t i = 0; i < original.layer->blobs().size(); ++i)
    ExpectBlobsNear(*original.layer->blobs()[i], *restored.layer->blobs()[i], 0, false,
                    StrCat("restored param[", i, "]"));
  restored.Forward();
  for (size_t t = 0; t < original.top.size(); ++t)
    ExpectBlobsNear(*original.top[t], *restored.top[t], 0, false,
                    StrCat("restored layer's top[", t, "]"));
  LayerParameter again;
  restored.layer->ToProto(&again);
  EXPECT_EQ(again.DebugString(), proto.DebugString()) << "ToProto is not stable";
}

void LayerConformanceTest::CpuMatchesGpu(const char* type) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  SetCudaDevice(0);
  ExpectGpuMatchesCpu(type, false);
}

void LayerConformanceTest::GpuInPlace(const char* type) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  {
    LayerInstance probe = MakeLayer(type, GetParam(), DataType::kFloat64);
    if (!probe.layer->AllowsInPlace()) GTEST_SKIP() << type << " does not allow in-place use";
    if (!probe.layer->HasGpuKernels()) GTEST_SKIP() << type << " has no GPU kernels";
  }
  SetCudaDevice(0);
  ExpectGpuMatchesCpu(type, true);
}

void LayerConformanceTest::ExpectGpuMatchesCpu(const char* type, bool gpu_in_place) {
  const LayerCase& c = GetParam();
  LayerInstance cpu = MakeLayer(type, c, DataType::kFloat32);
  LayerInstance gpu = MakeLayer(type, c, DataType::kFloat32, Device::Cuda(0), gpu_in_place);
  CopyParams(*cpu.layer, gpu.layer.get());
  cpu.Forward();
  gpu.Forward();
  for (size_t t = 0; t < cpu.top.size(); ++t)
    ExpectBlobsNear(*cpu.top[t], *gpu.top[t], c.gpu_tolerance, false,
                    StrCat("GPU forward top[", t, "]"));
  if (!HasGradientBottom(c) && cpu.layer->blobs().empty()) return;
  const auto weights = TopWeights(cpu);
  cpu.Backward(c, weights);
  gpu.Backward(c, weights);
  for (size_t i = 0; i < cpu.bottom.size(); ++i)
    if (!c.IsNoGradient(static_cast<int>(i)))
      ExpectBlobsNear(*cpu.bottom[i], *gpu.bottom[i], c.gpu_tolerance, true,
                      StrCat("GPU backward bottom[", i, "] diff"));
  for (size_t i = 0; i < cpu.layer->blobs().size(); ++i)
    ExpectBlobsNear(*cpu.layer->blobs()[i], *gpu.layer->blobs()[i], c.gpu_tolerance, true,
                    StrCat("GPU backward param[", i, "] diff"));
}

}  // namespace crema::testing
