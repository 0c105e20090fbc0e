// An out-of-tree layer type, built as a plugin: `crema VERB --plugin libcrema_example_plugin.so`.
//
// y = a * tanh(b * x), element-wise; any shape; in-place safe. dy/dx = a * b * (1 - tanh(b x)^2).
// Params: plugin_param { attr { key: "a" value: "1.7159" } attr { key: "b" value: "0.6667" } }
// (a and b default to 1; LeCun's scaled tanh is a = 1.7159, b = 2/3).
#include <cmath>
#include <vector>

#include "crema/layer.hpp"
#include "crema/layer_registry.hpp"
#include "crema/plugin.hpp"

namespace crema_example {

using crema::Blob;
using crema::BlobVec;

class ScaledTanhLayer final : public crema::NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ScaledTanh"; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override {
    crema::CheckAttrNames(*this, {"a", "b"});
    a_ = crema::GetAttr<double>(*this, "a", 1.0);
    b_ = crema::GetAttr<double>(*this, "b", 1.0);
  }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override {
    CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
  }
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {
    if (!propagate_down[0]) return;
    CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
  }

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top) const {
    const T* bottom_data = bottom.cpu_data<T>();
    T* top_data = top->mutable_cpu_data<T>();
    const T a = static_cast<T>(a_), b = static_cast<T>(b_);
    for (int64_t i = 0; i < bottom.count(); ++i) top_data[i] = a * std::tanh(b * bottom_data[i]);
  }
  // From the top alone (the bottom may be the same blob): tanh(b x) = y / a.
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom) const {
    const T* top_data = top.cpu_data<T>();
    const T* top_diff = top.cpu_diff<T>();
    T* bottom_diff = bottom->mutable_cpu_diff<T>();
    const T a = static_cast<T>(a_), b = static_cast<T>(b_);
    for (int64_t i = 0; i < bottom->count(); ++i) {
      const T t = a == T(0) ? T(0) : top_data[i] / a;
      bottom_diff[i] = top_diff[i] * a * b * (T(1) - t * t);
    }
  }

  double a_ = 1.0;
  double b_ = 1.0;
};

CREMA_REGISTER_LAYER(ScaledTanh, ScaledTanhLayer);

}  // namespace crema_example
