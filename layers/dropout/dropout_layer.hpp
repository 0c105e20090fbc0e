#pragma once
#include <cstdint>
#include <vector>

#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Dropout with ratio p. TRAIN: mask ~ Bernoulli(1 - p) per element, y = x * mask * scale,
// dx = dy * mask * scale, with scale = 1 / (1 - p). TEST: y = x, dx = dy. With scale_train false
// (a field of Caffe forks, field 2), TRAIN uses scale 1 and TEST scales by (1 - p) instead. Any
// shape; in-place safe. Params: dropout_param { dropout_ratio (default 0.5, in [0, 1)),
// scale_train (default true) }.
// The mask is counter-based: every TRAIN Forward draws one 64-bit seed from the thread's
// generator, and element i is kept when a hash of (seed, i) falls below 1 - p. So the mask costs
// no stored random numbers, Backward recomputes it, any thread count gives the same mask, and
// CPU and GPU nets drop the same units.
class DropoutLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Dropout"; }
  // Outside TRAIN a scaled copy (in TRAIN the mask's order would follow the layout).
  ChannelBlocking channel_blocking() const override {
    return phase() == TRAIN ? ChannelBlocking::kNone : ChannelBlocking::kPassThrough;
  }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // The mask of the last TRAIN Forward (1 keeps an element).
  std::vector<unsigned int> mask() const;

  // Whether element i is kept under `seed`: splitmix64 of (seed, i), its top 53 bits read as a
  // uniform number in [0, 1) and compared with keep_prob (exact in double on host and device).
  static CREMA_HOST_DEVICE inline bool Keep(uint64_t seed, uint64_t i, double keep_prob) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0) < keep_prob;
  }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Apply(int64_t count, const T* x, T* y) const;
  // Draws the seed of this Forward's mask (TRAIN).
  void NewMask(int64_t count);

  double threshold_ = 0.5;  // the dropout ratio p
  double scale_ = 2.0;      // 1 / (1 - p)
  bool scale_train_ = true;
  uint64_t mask_seed_ = 0;
  int64_t mask_count_ = 0;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
