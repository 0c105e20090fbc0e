#include "layers/convolution_depthwise/convolution_depthwise_layer.hpp"

#include <glog/logging.h>

#include "crema/layer_registry.hpp"

namespace crema {

void ConvolutionDepthwiseLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  ConvolutionParameter* param = layer_param_.mutable_convolution_param();
  const int num_axes = bottom[0]->num_axes();
  const int axis = param->axis();
  // An axis out of range is reported by ConvolutionLayer's own checks.
  if (axis >= -num_axes && axis < num_axes) {
    const int channels = bottom[0]->shape(bottom[0]->CanonicalAxisIndex(axis));
    if (param->has_num_output() && static_cast<int>(param->num_output()) != channels) {
      LOG(WARNING) << "Layer " << name() << " (ConvolutionDepthwise): num_output "
                   << param->num_output() << " ignored; the layer has one filter per input "
                   << "channel, so it outputs " << channels << " channels";
    }
    if (param->has_group() && static_cast<int>(param->group()) != channels) {
      LOG(WARNING) << "Layer " << name() << " (ConvolutionDepthwise): group " << param->group()
                   << " ignored; the layer is depthwise, group = " << channels << " channels";
    }
    param->set_num_output(channels);
    param->set_group(channels);
  }
  ConvolutionLayer::LayerSetUp(bottom, top);
}

CREMA_REGISTER_LAYER(ConvolutionDepthwise, ConvolutionDepthwiseLayer);
CREMA_REGISTER_LAYER(DepthwiseConvolution, DepthwiseConvolutionLayer);

}  // namespace crema
