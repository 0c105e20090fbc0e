#include "support/gradient_checker.hpp"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "core/rng.hpp"

namespace crema::testing {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_ += StrCat(line + 1, ":", column + 1, ": ", message, "\n");
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {}
  const std::string& errors() const { return errors_; }

 private:
  std::string errors_;
};

template <typename Draw>
void FillWith(Blob* blob, Draw draw) {
  const int64_t n = blob->count();
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* data = blob->mutable_cpu_data<T>();
    for (int64_t i = 0; i < n; ++i) data[i] = static_cast<T>(draw());
  });
}

double* Data(Blob* blob) { return blob->mutable_cpu_data<double>(); }

void SetDiff(Blob* blob, const std::vector<double>& values) {
  double* diff = blob->mutable_cpu_diff<double>();
  std::copy(values.begin(), values.end(), diff);
}

bool IsNoGradient(const GradientCheckOptions& options, int bottom_index) {
  return std::find(options.no_gradient_bottoms.begin(), options.no_gradient_bottoms.end(),
                   bottom_index) != options.no_gradient_bottoms.end();
}

bool NearKink(const GradientCheckOptions& options, double x) {
  return options.kink_range >= 0 && std::fabs(x - options.kink) <= options.kink_range;
}

// The fixed R of the objective (see the header), sized to the current tops.
std::vector<std::vector<double>> MakeWeights(const Layer& layer, const BlobVec& top,
                                             uint32_t seed) {
  bool has_loss = false;
  for (int t = 0; t < static_cast<int>(top.size()); ++t) has_loss |= layer.loss(t) != 0;
  std::vector<std::vector<double>> r(top.size());
  for (int t = 0; t < static_cast<int>(top.size()); ++t) {
    r[t].resize(top[t]->count());
    if (has_loss) {
      std::fill(r[t].begin(), r[t].end(), layer.loss(t));
    } else {
      std::mt19937 gen(seed + 7919u * (t + 1));
      std::uniform_real_distribution<double> uniform(-1.0, 1.0);
      for (double& v : r[t]) v = uniform(gen);
    }
  }
  return r;
}

struct Target {
  Blob* blob;
  std::string name;
};

class Checker {
 public:
  Checker(Layer* layer, const BlobVec& bottom, const BlobVec& top,
          const GradientCheckOptions& options)
      : layer_(layer), bottom_(bottom), top_(top), options_(options) {}

  // False (with a failure recorded) when the blobs are not float64.
  bool Validate() const {
    if (layer_->dtype() != DataType::kFloat64) {
      ADD_FAILURE() << "CheckGradient: call layer->set_dtype(DataType::kFloat64) before SetUp";
      return false;
    }
    for (size_t i = 0; i < bottom_.size(); ++i) {
      if (bottom_[i]->dtype() != DataType::kFloat64) {
        ADD_FAILURE() << "CheckGradient: bottom[" << i << "] is "
                      << DataTypeName(bottom_[i]->dtype()) << ", not float64";
        return false;
      }
    }
    for (size_t i = 0; i < top_.size(); ++i) {
      if (top_[i]->dtype() != DataType::kFloat64) {
        ADD_FAILURE() << "CheckGradient: top[" << i << "] is " << DataTypeName(top_[i]->dtype())
                      << ", not float64";
        return false;
      }
    }
    return true;
  }

  double ForwardObjective() {
    SetRandomSeed(options_.seed);
    layer_->Forward(bottom_, top_);
    return Objective(top_, weights_);
  }

  // Runs Forward + Backward with top diff = R and returns the analytic gradients of `targets`.
  std::vector<std::vector<double>> Analytic(const std::vector<bool>& propagate_down,
                                            const std::vector<Target>& targets) {
    SetRandomSeed(options_.seed);
    layer_->Forward(bottom_, top_);
    weights_ = MakeWeights(*layer_, top_, options_.seed);
    // Zero bottom diffs before writing top diffs: a layer may have made them share memory.
    for (Blob* b : bottom_) b->SetDiffZero();
    for (size_t i = 0; i < layer_->blobs().size(); ++i) {
      layer_->blobs()[i]->SetDiffZero();
      layer_->set_param_propagate_down(static_cast<int>(i), true);
    }
    for (size_t t = 0; t < top_.size(); ++t) SetDiff(top_[t], weights_[t]);
    layer_->Backward(top_, propagate_down, bottom_);
    std::vector<std::vector<double>> grads;
    for (const Target& target : targets) {
      const double* diff = target.blob->cpu_diff<double>();
      grads.emplace_back(diff, diff + target.blob->count());
    }
    return grads;
  }

  void Compare(const Target& target, int64_t index, double analytic, double numeric,
               int* failures) {
    const double scale = std::max({std::fabs(analytic), std::fabs(numeric), 1.0});
    if (std::fabs(analytic - numeric) <= options_.threshold * scale) return;
    if (++*failures <= 10) {
      ADD_FAILURE() << layer_->type() << " layer \"" << layer_->name() << "\": gradient of "
                    << target.name << " (shape " << target.blob->shape_string() << ") element "
                    << index << ": analytic " << analytic << " vs numeric " << numeric << " (input "
                    << target.blob->data_at(index) << ", |diff| " << std::fabs(analytic - numeric)
                    << " > " << options_.threshold * scale << ")";
    }
  }

  void ReportCount(const Target& target, int failures) {
    if (failures > 10)
      ADD_FAILURE() << target.name << ": " << failures << " gradient mismatches in all";
  }

  // Sampled central differences, one element at a time.
  void CheckSampled(const std::vector<bool>& propagate_down, const std::vector<Target>& targets) {
    const auto analytic = Analytic(propagate_down, targets);
    for (size_t k = 0; k < targets.size(); ++k) {
      const Target& target = targets[k];
      int failures = 0;
      for (int64_t index : Sample(target.blob->count(), k)) {
        const double x = Data(target.blob)[index];
        if (NearKink(options_, x)) continue;
        Data(target.blob)[index] = x + options_.stepsize;
        const double positive = ForwardObjective();
        Data(target.blob)[index] = x - options_.stepsize;
        const double negative = ForwardObjective();
        Data(target.blob)[index] = x;
        Compare(target, index, analytic[k][index], (positive - negative) / (2 * options_.stepsize),
                &failures);
      }
      ReportCount(target, failures);
    }
  }

  // All elements of one bottom moved at once; valid for element-wise layers.
  void CheckEltwise(const std::vector<bool>& propagate_down, const std::vector<Target>& targets) {
    const auto analytic = Analytic(propagate_down, targets);
    for (size_t k = 0; k < targets.size(); ++k) {
      const Target& target = targets[k];
      const int64_t n = target.blob->count();
      for (size_t t = 0; t < top_.size(); ++t) {
        if (top_[t]->count() != n) {
          ADD_FAILURE() << "CheckGradientEltwise: top[" << t << "] has " << top_[t]->count()
                        << " elements but " << target.name << " has " << n
                        << "; the layer is not element-wise";
          return;
        }
      }
      const std::vector<double> x(Data(target.blob), Data(target.blob) + n);
      auto shifted_tops = [&](double delta) {
        for (int64_t i = 0; i < n; ++i) Data(target.blob)[i] = x[i] + delta;
        ForwardObjective();
        std::vector<std::vector<double>> values;
        for (Blob* t : top_) values.emplace_back(t->cpu_data<double>(), t->cpu_data<double>() + n);
        return values;
      };
      const auto positive = shifted_tops(options_.stepsize);
      const auto negative = shifted_tops(-options_.stepsize);
      std::copy(x.begin(), x.end(), Data(target.blob));
      int failures = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (NearKink(options_, x[i])) continue;
        double numeric = 0;
        for (size_t t = 0; t < top_.size(); ++t)
          numeric += weights_[t][i] * (positive[t][i] - negative[t][i]);
        Compare(target, i, analytic[k][i], numeric / (2 * options_.stepsize), &failures);
      }
      ReportCount(target, failures);
    }
  }

  std::vector<int64_t> Sample(int64_t count, size_t salt) const {
    std::vector<int64_t> indices(count);
    std::iota(indices.begin(), indices.end(), 0);
    if (count <= options_.max_checks) return indices;
    std::mt19937 gen(options_.seed + 104729u * static_cast<uint32_t>(salt + 1));
    std::shuffle(indices.begin(), indices.end(), gen);
    indices.resize(std::max(options_.max_checks, 0));
    std::sort(indices.begin(), indices.end());
    return indices;
  }

 private:
  Layer* layer_;
  const BlobVec& bottom_;
  const BlobVec& top_;
  const GradientCheckOptions& options_;
  std::vector<std::vector<double>> weights_;
};

std::vector<Target> ParamTargets(Layer* layer) {
  std::vector<Target> targets;
  for (size_t i = 0; i < layer->blobs().size(); ++i)
    targets.push_back({layer->blobs()[i].get(), StrCat("param[", i, "]")});
  return targets;
}

std::vector<bool> PropagateDown(const BlobVec& bottom, const GradientCheckOptions& options,
                                int check_bottom) {
  std::vector<bool> propagate_down(bottom.size(), false);
  for (int i = 0; i < static_cast<int>(bottom.size()); ++i)
    propagate_down[i] = !IsNoGradient(options, i) && (check_bottom < 0 || check_bottom == i);
  return propagate_down;
}

}  // namespace

LayerParameter ParseLayerParam(const std::string& text) {
  LayerParameter param;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &param)) {
    ADD_FAILURE() << "cannot parse LayerParameter text:\n" << text << "\n" << errors.errors();
    throw std::runtime_error("ParseLayerParam: " + errors.errors());
  }
  return param;
}

void FillUniform(Blob* blob, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> uniform(lo, hi);
  FillWith(blob, [&] { return uniform(gen); });
}

void FillGaussian(Blob* blob, double mean, double stddev, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> gaussian(mean, stddev);
  FillWith(blob, [&] { return gaussian(gen); });
}

void FillInteger(Blob* blob, int num_classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> uniform(0, std::max(num_classes - 1, 0));
  FillWith(blob, [&] { return uniform(gen); });
}

double Objective(const BlobVec& top, const std::vector<std::vector<double>>& r) {
  double objective = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const double* data = top[t]->cpu_data<double>();
    for (int64_t i = 0; i < top[t]->count(); ++i) objective += data[i] * r[t][i];
  }
  return objective;
}

void CheckGradient(Layer* layer, const BlobVec& bottom, const BlobVec& top,
                   const GradientCheckOptions& options, int check_bottom, bool check_params) {
  Checker checker(layer, bottom, top, options);
  if (!checker.Validate()) return;
  const std::vector<bool> propagate_down = PropagateDown(bottom, options, check_bottom);
  std::vector<Target> targets;
  for (int i = 0; i < static_cast<int>(bottom.size()); ++i)
    if (propagate_down[i]) targets.push_back({bottom[i], StrCat("bottom[", i, "]")});
  if (check_bottom < 0 || check_params)
    for (const Target& t : ParamTargets(layer)) targets.push_back(t);
  checker.CheckSampled(propagate_down, targets);
}

void CheckGradientEltwise(Layer* layer, const BlobVec& bottom, const BlobVec& top,
                          const GradientCheckOptions& options) {
  Checker checker(layer, bottom, top, options);
  if (!checker.Validate()) return;
  const std::vector<bool> propagate_down = PropagateDown(bottom, options, -1);
  std::vector<Target> targets;
  for (int i = 0; i < static_cast<int>(bottom.size()); ++i)
    if (propagate_down[i]) targets.push_back({bottom[i], StrCat("bottom[", i, "]")});
  checker.CheckEltwise(propagate_down, targets);
  const std::vector<Target> params = ParamTargets(layer);
  if (!params.empty()) checker.CheckSampled(propagate_down, params);
}

}  // namespace crema::testing
