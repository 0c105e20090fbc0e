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
  // Loaded from a file (a .caffemodel): keep the values, as Caffe does; else zeros.
  SetUpLearnableBlobs({{"parameter", shape, true}}, "parameter_param.shape");
  param_propagate_down_.assign(1, true);
  top[0]->Reshape(shape);
}

void ParameterLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ShareData(*blobs_[0]);
  top[0]->ShareDiff(*blobs_[0]);
}

CREMA_REGISTER_LAYER(Parameter, ParameterLayer);

}  // namespace crema
