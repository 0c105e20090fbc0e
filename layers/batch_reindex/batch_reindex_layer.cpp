#include "layers/batch_reindex/batch_reindex_layer.hpp"

#include <vector>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void BatchReindexLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0] && top[0] != bottom[1],
                    "BatchReindex does not allow in-place computation");
  CREMA_CHECK_SHAPE(bottom[1]->num_axes() == 1, "bottom 1 (the indices) must be 1-D, got shape ",
                    bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 1, "bottom 0 must have a batch axis, got a scalar");
  std::vector<int> shape = bottom[0]->shape();
  shape[0] = bottom[1]->shape(0);
  top[0]->Reshape(shape);
}

std::vector<int64_t> BatchReindexLayer::Indices(const Blob& index, int num) const {
  std::vector<int64_t> indices(index.count());
  for (int64_t i = 0; i < index.count(); ++i) {
    // As Caffe: the value is truncated toward zero, then checked.
    const double value = index.data_at(i);
    if (!(value > -1.0 && value < num))
      CREMA_THROW_RUNTIME(ErrorPrefix(), "index ", value, " at position ", i,
                          " of bottom 1 is outside the batch [0, ", num, ")");
    indices[i] = static_cast<int64_t>(value);
  }
  return indices;
}

template <typename T>
void BatchReindexLayer::Forward(const BlobVec& bottom, Blob* top) const {
  const std::vector<int64_t> indices = Indices(*bottom[1], bottom[0]->shape(0));
  if (top->count() == 0) return;
  const int64_t inner = bottom[0]->count(1);
  const T* bottom_data = bottom[0]->cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  for (size_t i = 0; i < indices.size(); ++i)
    cpu::Copy<T>(inner, bottom_data + indices[i] * inner, top_data + i * inner);
}

template <typename T>
void BatchReindexLayer::Backward(const Blob& top, const BlobVec& bottom) const {
  const std::vector<int64_t> indices = Indices(*bottom[1], bottom[0]->shape(0));
  const int64_t inner = bottom[0]->count(1);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  cpu::Set<T>(bottom[0]->count(), T(0), bottom_diff);
  for (size_t i = 0; i < indices.size(); ++i)
    cpu::Axpy<T>(inner, T(1), top_diff + i * inner, bottom_diff + indices[i] * inner);
}

void BatchReindexLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top[0]));
}

void BatchReindexLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[1], "cannot backpropagate to bottom 1 (the indices)");
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom));
}

CREMA_REGISTER_LAYER(BatchReindex, BatchReindexLayer);

}  // namespace crema
