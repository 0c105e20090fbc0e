#include "layers/tile/tile_layer.hpp"

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void TileLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Tile does not allow in-place computation");
  const TileParameter& param = layer_param_.tile_param();
  const int num_axes = bottom[0]->num_axes();
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "tile_param.axis",
                    "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                    bottom[0]->shape_string(), ", got ", param.axis());
  const int axis = bottom[0]->CanonicalAxisIndex(param.axis());
  CREMA_CHECK_PARAM(param.has_tiles(), "tile_param.tiles", "must be given");
  CREMA_CHECK_PARAM(param.tiles() > 0, "tile_param.tiles", "must be > 0, got ", param.tiles());
  tiles_ = param.tiles();
  std::vector<int> top_shape = bottom[0]->shape();
  const int64_t tiled = static_cast<int64_t>(top_shape[axis]) * tiles_;
  CREMA_CHECK_SHAPE(tiled <= INT32_MAX, "tiled axis too large: ", tiled);
  top_shape[axis] = static_cast<int>(tiled);
  top[0]->Reshape(top_shape);
  outer_dim_ = bottom[0]->count(0, axis);
  inner_dim_ = bottom[0]->count(axis);
}

template <typename T>
void TileLayer::Forward(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t i = 0; i < outer_dim_; ++i) {
    for (int t = 0; t < tiles_; ++t) {
      cpu::Copy<T>(inner_dim_, bottom_data, top_data);
      top_data += inner_dim_;
    }
    bottom_data += inner_dim_;
  }
}

template <typename T>
void TileLayer::Backward(const Blob& top, Blob* bottom) const {
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  for (int64_t i = 0; i < outer_dim_; ++i) {
    cpu::Copy<T>(inner_dim_, top_diff, bottom_diff);
    top_diff += inner_dim_;
    for (int t = 1; t < tiles_; ++t) {
      cpu::Axpy<T>(inner_dim_, T(1), top_diff, bottom_diff);
      top_diff += inner_dim_;
    }
    bottom_diff += inner_dim_;
  }
}

void TileLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void TileLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Tile, TileLayer);

}  // namespace crema
