#include "layers/parameter/parameter_layer.hpp"

#include <memory>
#include <vector>

#include "crema/layer_registry.hpp"

namespace crema {

void ParameterLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BlobShape& proto_shape = layer_param_.parameter_param().shape();
  std::vector<int> shape;
  int64_t count = 1;
  for (int i = 0; i < proto_shape.dim_size(); ++i) {
    const int64_t dim = proto_shape.dim(i);
    CREMA_CHECK_PARAM(dim >= 0 && dim <= INT32_MAX, "parameter_param.shape",
                      "dims must be >= 0, got ", dim, " at dim ", i);
    shape.push_back(static_cast<int>(dim));
    count *= dim;
  }
  if (!blobs_.empty()) {
    // Loaded from a file (a .caffemodel): keep the values, as Caffe does.
    CREMA_CHECK_PARAM(blobs_.size() == 1, "blobs", "must hold 1 blob, got ", blobs_.size());
    CREMA_CHECK_PARAM(blobs_[0]->count() == count, "blobs", "the blob of shape ",
                      blobs_[0]->shape_string(), " does not fit parameter_param.shape (", count,
                      " elements)");
    if (blobs_[0]->dtype() != dtype()) {
      auto converted = std::make_shared<Blob>(blobs_[0]->shape(), dtype());
      converted->CopyFrom(*blobs_[0]);
      blobs_[0] = converted;
    }
  } else {
    blobs_.push_back(std::make_shared<Blob>(shape, dtype()));
    blobs_[0]->SetDataZero();
  }
  param_propagate_down_.assign(1, true);
  top[0]->Reshape(shape);
}

void ParameterLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ShareData(*blobs_[0]);
  top[0]->ShareDiff(*blobs_[0]);
}

CREMA_REGISTER_LAYER(Parameter, ParameterLayer);

}  // namespace crema
