#include "layers/input/input_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void InputLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InputParameter& param = layer_param_.input_param();
  const int num_top = static_cast<int>(top.size());
  const int num_shape = param.shape_size();
  CREMA_CHECK_PARAM(num_shape == 0 || num_shape == 1 || num_shape == num_top, "input_param.shape",
                    "must be given once, once per top or not at all: ", num_top, " tops vs. ",
                    num_shape, " shapes");
  for (int s = 0; s < num_shape; ++s) {
    const BlobShape& shape = param.shape(s);
    CREMA_CHECK_PARAM(shape.dim_size() <= Blob::kMaxAxes, "input_param.shape", "has ",
                      shape.dim_size(), " axes; at most ", Blob::kMaxAxes, " are allowed");
    for (int d = 0; d < shape.dim_size(); ++d)
      CREMA_CHECK_PARAM(shape.dim(d) >= 0 && shape.dim(d) <= INT32_MAX, "input_param.shape", "dim ",
                        d, " of shape ", s, " must be in [0, 2^31), got ", shape.dim(d));
  }
  if (num_shape == 0) return;
  for (int i = 0; i < num_top; ++i) top[i]->Reshape(param.shape(num_shape == 1 ? 0 : i));
}

CREMA_REGISTER_LAYER(Input, InputLayer);

}  // namespace crema
