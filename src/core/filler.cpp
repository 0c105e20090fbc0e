#include "core/filler.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.hpp"

namespace crema {
namespace {

[[noreturn]] void Fail(const std::string& context, const FillerParameter& param,
                       const std::string& message) {
  throw ConfigError(StrCat(context, "filler \"", param.type(), "\": ", message));
}

void RequireNoSparse(const FillerParameter& param, const std::string& context) {
  if (param.sparse() != -1) {
    Fail(context, param,
         StrCat("sparse is only supported by the gaussian filler, got sparse: ", param.sparse()));
  }
}

// Caffe's fans: fan_in = count / num, fan_out = count / channels (count for a 1-axis blob). For a
// (num_output, channels, kh, kw) weight these are channels*kh*kw and num_output*kh*kw.
double VarianceNormDenominator(const FillerParameter& param, const Blob& blob) {
  const int64_t count = blob.count();
  const int64_t fan_in = blob.num_axes() >= 1 ? count / blob.shape(0) : count;
  const int64_t fan_out = blob.num_axes() >= 2 ? count / blob.shape(1) : count;
  switch (param.variance_norm()) {
    case FillerParameter::FAN_OUT:
      return static_cast<double>(fan_out);
    case FillerParameter::AVERAGE:
      return static_cast<double>(fan_in + fan_out) / 2.0;
    case FillerParameter::FAN_IN:
    default:
      return static_cast<double>(fan_in);
  }
}

template <typename T>
void Fill(const FillerParameter& param, Blob* blob, const std::string& context) {
  const std::string& type = param.type();
  const int64_t count = blob->count();
  if (type == "constant") {
    RequireNoSparse(param, context);
    T* data = blob->mutable_cpu_data<T>();
    std::fill(data, data + count, static_cast<T>(param.value()));
  } else if (type == "uniform") {
    RequireNoSparse(param, context);
    if (!(param.min() <= param.max())) {
      Fail(context, param,
           StrCat("min must be <= max, got min: ", param.min(), " max: ", param.max()));
    }
    cpu::RngUniform<T>(count, static_cast<T>(param.min()), static_cast<T>(param.max()),
                       blob->mutable_cpu_data<T>());
  } else if (type == "gaussian") {
    if (!(param.std() > 0)) Fail(context, param, StrCat("std must be > 0, got ", param.std()));
    const int sparse = param.sparse();
    if (sparse < -1) Fail(context, param, StrCat("sparse must be >= -1, got ", sparse));
    // Validate before drawing so a bad setting leaves the generator untouched.
    T non_zero_probability = 1;
    if (sparse >= 0) {
      // As Caffe: each weight survives with probability sparse / shape(0), shape(0) being the
      // number of outputs of a (num_output, ...) weight blob.
      if (blob->num_axes() < 1) Fail(context, param, "sparse needs a blob with at least 1 axis");
      const int num_outputs = blob->shape(0);
      non_zero_probability = static_cast<T>(sparse) / static_cast<T>(num_outputs);
      if (num_outputs > 0 && non_zero_probability > T(1)) {
        Fail(context, param,
             StrCat("sparse (", sparse, ") must not exceed the number of outputs (", num_outputs,
                    ")"));
      }
    }
    T* data = blob->mutable_cpu_data<T>();
    cpu::RngGaussian<T>(count, static_cast<T>(param.mean()), static_cast<T>(param.std()), data);
    if (sparse >= 0) {
      std::vector<int> mask(static_cast<size_t>(count));
      cpu::RngBernoulli<T>(count, non_zero_probability, mask.data());
      for (int64_t i = 0; i < count; ++i) data[i] *= mask[i];
    }
  } else if (type == "positive_unitball") {
    RequireNoSparse(param, context);
    T* data = blob->mutable_cpu_data<T>();
    cpu::RngUniform<T>(count, T(0), T(1), data);
    if (count == 0) return;
    // Each item along the first axis becomes a point of the probability simplex.
    const int64_t num = blob->num_axes() >= 1 ? blob->shape(0) : 1;
    const int64_t dim = count / num;
    for (int64_t i = 0; i < num; ++i) {
      T* row = data + i * dim;
      T sum = 0;
      for (int64_t j = 0; j < dim; ++j) sum += row[j];
      for (int64_t j = 0; j < dim; ++j) row[j] /= sum;
    }
  } else if (type == "xavier") {
    RequireNoSparse(param, context);
    if (count == 0) return;
    const T scale = static_cast<T>(std::sqrt(3.0 / VarianceNormDenominator(param, *blob)));
    cpu::RngUniform<T>(count, -scale, scale, blob->mutable_cpu_data<T>());
  } else if (type == "msra") {
    RequireNoSparse(param, context);
    if (count == 0) return;
    const T std = static_cast<T>(std::sqrt(2.0 / VarianceNormDenominator(param, *blob)));
    cpu::RngGaussian<T>(count, T(0), std, blob->mutable_cpu_data<T>());
  } else if (type == "bilinear") {
    RequireNoSparse(param, context);
    if (blob->num_axes() != 4) {
      Fail(
          context, param,
          StrCat("needs a 4-axis blob (num, channels, height, width), got ", blob->shape_string()));
    }
    const int width = blob->width();
    const int height = blob->height();
    if (width != height) {
      Fail(context, param,
           StrCat("needs a square kernel, got height ", height, " and width ", width));
    }
    // An upsampling kernel for a factor f deconvolution; float arithmetic as in Caffe, so float
    // blobs get Caffe's exact values.
    T* data = blob->mutable_cpu_data<T>();
    const int f = static_cast<int>(std::ceil(width / 2.0));
    const float c = static_cast<float>((2 * f - 1 - f % 2) / (2.0 * f));
    for (int64_t i = 0; i < count; ++i) {
      const float x = static_cast<float>(i % width);
      const float y = static_cast<float>((i / width) % height);
      data[i] = static_cast<T>((1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c)));
    }
  } else {
    throw ConfigError(StrCat(context, "unknown filler type \"", type,
                             "\" (known: constant, uniform, gaussian, positive_unitball, xavier, "
                             "msra, bilinear)"));
  }
}

}  // namespace

void FillBlob(const FillerParameter& param, Blob* blob, const std::string& context) {
  CREMA_ASSERT(blob != nullptr);
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, Fill<T>(param, blob, context));
}

}  // namespace crema
