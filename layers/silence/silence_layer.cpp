#include "layers/silence/silence_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void SilenceLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) bottom[i]->SetDiffZero();
}

CREMA_REGISTER_LAYER(Silence, SilenceLayer);

}  // namespace crema
