// Folding BatchNorm (+ Scale) into the preceding convolution for inference (src/net/README.md).
// With Caffe's BatchNorm (global statistics, s = blobs[2], f = s == 0 ? 0 : 1 / s,
// mean = f * blobs[0], var = f * blobs[1]) and Scale (gamma, optional beta), per output channel c:
//   a_c = gamma_c / sqrt(var_c + eps),  W'_c = a_c * W_c,  b'_c = a_c * (b_c - mean_c) + beta_c,
// so conv'(x) = Scale(BatchNorm(conv(x))). The folded convolution is a copy of the layer with
// bias_term on; the original keeps the unfolded weights (params(), saving, copying).
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {
namespace {

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Caffe's rule: use_global_stats when given, else true in TEST.
bool UsesGlobalStats(const Layer& layer) {
  const BatchNormParameter& param = layer.layer_param().batch_norm_param();
  return param.has_use_global_stats() ? param.use_global_stats() : layer.phase() == TEST;
}

// The blob's values as doubles (any element type), on the host.
std::vector<double> Values(const Blob& blob) {
  Blob wide(blob.shape(), DataType::kFloat64);
  wide.CopyFrom(blob);
  const double* x = wide.cpu_data<double>();
  return std::vector<double>(x, x + blob.count());
}

void SetValues(const std::vector<double>& values, Blob* blob) {
  Blob wide(blob->shape(), DataType::kFloat64);
  std::copy(values.begin(), values.end(), wide.mutable_cpu_data<double>());
  blob->CopyFrom(wide);
}

// Multiplies each slab blob[c, ...] by factor[c], in place (no copy of a large weight blob).
void ScaleSlabs(const std::vector<double>& factor, Blob* blob) {
  const int64_t slab = blob->count() / static_cast<int64_t>(factor.size());
  const auto scale = [&](auto* x) {
    using T = std::remove_pointer_t<decltype(x)>;
    for (size_t c = 0; c < factor.size(); ++c)
      for (int64_t i = 0; i < slab; ++i)
        x[c * slab + i] = static_cast<T>(factor[c] * static_cast<double>(x[c * slab + i]));
  };
  if (blob->dtype() == DataType::kFloat32) return scale(blob->mutable_cpu_data<float>());
  if (blob->dtype() == DataType::kFloat64) return scale(blob->mutable_cpu_data<double>());
  std::vector<double> values = Values(*blob);
  scale(values.data());
  SetValues(values, blob);
}

}  // namespace

int Net::SoleReader(int producer, int blob) const {
  int reader = -1, readers = 0;
  for (int l = producer + 1; l < num_layers(); ++l) {
    for (int b : bottom_id_vecs_[l])
      if (b == blob) reader = l, ++readers;
    if (Contains(top_id_vecs_[l], blob)) break;  // an in-place layer wrote a new value
  }
  return readers == 1 ? reader : -1;
}

void Net::SetFoldBatchNorm(bool fold) {
  fold_batch_norm_ = fold;
  // The plan depends on the folds (folded layers' tops alias their bottoms).
  if (memory_plan_ != MemoryPlan::kOff)
    SetMemoryPlan(memory_plan_, keep_blobs_);
  else
    PlanFold();
}

void Net::PlanFold() {
  // Tops that aliased a folded layer's bottom get memory of their own again.
  for (int l = 0; l < static_cast<int>(folded_into_.size()); ++l) {
    if (folded_into_[l] < 0) continue;
    Blob* bottom = bottom_vecs_[l][0];
    for (Blob* top : top_vecs_[l])
      if (top != bottom && top->data() == bottom->data())
        top->UseDataMemory(std::make_shared<SyncedMemory>(static_cast<size_t>(top->count()) *
                                                          SizeOf(top->dtype())));
  }
  folded_into_.assign(num_layers(), -1);
  folded_convs_.clear();
  folded_convs_.resize(num_layers());
  fold_stale_ = false;
  // Which ReLUs fuse depends on the folds: PlanFuseReLU runs after them.
  if (!fold_batch_norm_) return PlanFuseReLU();
  const std::set<std::string> keep(keep_blobs_.begin(), keep_blobs_.end());
  // A kept blob must still hold the value its last writer gives it: a folded layer's top that
  // is a blob of its own must not be kept.
  const auto foldable_top = [&](int layer, int bottom_blob) {
    const int top = top_id_vecs_[layer][0];
    // (Under --amp a top of another storage type cannot alias the convolution's.)
    return blob_loss_weights_[top] == 0 && blobs_[top]->dtype() == blobs_[bottom_blob]->dtype() &&
           (top == bottom_blob || !keep.count(blob_names_[bottom_blob]));
  };
  for (int l = 0; l < num_layers(); ++l) {
    const Layer& conv = *layers_[l];
    if (std::string(conv.type()) != "Convolution" || bottom_id_vecs_[l].size() != 1 ||
        top_id_vecs_[l].size() != 1 || conv.layer_param().convolution_param().axis() != 1 ||
        conv.blobs().empty())
      continue;
    const int conv_top = top_id_vecs_[l][0];
    const int channels = conv.blobs()[0]->shape(0);
    const int bn = SoleReader(l, conv_top);
    if (bn < 0 || std::string(layers_[bn]->type()) != "BatchNorm" ||
        !UsesGlobalStats(*layers_[bn]) || layers_[bn]->blobs().size() != 3 ||
        layers_[bn]->blobs()[0]->count() != channels || !foldable_top(bn, conv_top))
      continue;
    folded_into_[bn] = l;
    fold_stale_ = true;
    const int bn_top = top_id_vecs_[bn][0];
    const int scale = SoleReader(bn, bn_top);
    if (scale < 0 || std::string(layers_[scale]->type()) != "Scale" ||
        bottom_id_vecs_[scale].size() != 1 || !foldable_top(scale, bn_top))
      continue;
    const ScaleParameter& sp = layers_[scale]->layer_param().scale_param();
    bool per_channel = sp.axis() == 1 && sp.num_axes() == 1;
    for (const BlobPtr& blob : layers_[scale]->blobs())
      per_channel &= blob->shape() == std::vector<int>{channels};
    if (per_channel) folded_into_[scale] = l;
  }
  PlanFuseReLU();
}

void Net::ApplyFold() {
  fold_stale_ = false;
  for (int l = 0; l < num_layers(); ++l) {
    const Layer& conv = *layers_[l];
    int bn = -1, scale = -1;
    for (int f = l + 1; f < num_layers(); ++f) {
      if (folded_into_[f] != l) continue;
      (std::string(layers_[f]->type()) == "BatchNorm" ? bn : scale) = f;
    }
    if (bn < 0) continue;
    const int channels = conv.blobs()[0]->shape(0);
    std::vector<double> bias(channels, 0.0);
    if (conv.layer_param().convolution_param().bias_term() && conv.blobs().size() > 1)
      bias = Values(*conv.blobs()[1]);
    const std::vector<BlobPtr>& stats = layers_[bn]->blobs();
    const double s = stats[2]->data_at(0);
    const double factor = s == 0 ? 0 : 1 / s;
    const double eps = layers_[bn]->layer_param().batch_norm_param().eps();
    const std::vector<double> mean = Values(*stats[0]), var = Values(*stats[1]);
    std::vector<double> gamma(channels, 1.0), beta(channels, 0.0);
    if (scale >= 0) {
      gamma = Values(*layers_[scale]->blobs()[0]);
      if (layers_[scale]->blobs().size() > 1) beta = Values(*layers_[scale]->blobs()[1]);
    }
    std::vector<double> a(channels), folded_bias(channels);
    for (int c = 0; c < channels; ++c) {
      a[c] = gamma[c] / std::sqrt(factor * var[c] + eps);
      folded_bias[c] = a[c] * (bias[c] - factor * mean[c]) + beta[c];
    }
    if (!folded_convs_[l]) {
      LayerParameter param = conv.layer_param();
      param.clear_blobs();
      param.clear_param();
      param.mutable_convolution_param()->set_bias_term(true);
      std::unique_ptr<Layer> copy = LayerRegistry::Create(param);
      copy->set_device(device_);
      copy->set_dtype(conv.dtype());
      copy->set_workspace(workspace_);
      copy->set_forward_only(conv.forward_only());
      if (amp_ != Amp::kOff) AmpBind(l);
      copy->SetUp(layer_bottoms_[l], layer_tops_[l]);
      if (const CpuEngineChoice* choice = layers_[l]->cpu_engine_choice())
        copy->cpu_engine_choice()->set_crema_races(choice->crema_races());
      folded_convs_[l] = std::move(copy);
    }
    Blob* folded_weight = folded_convs_[l]->blobs()[0].get();
    folded_weight->CopyFrom(*conv.blobs()[0]);
    ScaleSlabs(a, folded_weight);
    SetValues(folded_bias, folded_convs_[l]->blobs()[1].get());
  }
}

}  // namespace crema
