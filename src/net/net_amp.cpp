// Mixed precision (NetOptions::amp, docs/amp.md): which blobs are stored in half precision, and
// the float32 stand-ins through which the layers read and write them.
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>

#include "crema/net.hpp"
#include "math/convert.hpp"

namespace crema {

const char* AmpName(Amp amp) {
  switch (amp) {
    case Amp::kOff:
      return "off";
    case Amp::kFloat16:
      return "fp16";
    case Amp::kBFloat16:
      return "bf16";
  }
  return "off";
}

DataType AmpHalfType(Amp amp) {
  switch (amp) {
    case Amp::kFloat16:
      return DataType::kFloat16;
    case Amp::kBFloat16:
      return DataType::kBFloat16;
    case Amp::kOff:
      break;
  }
  return DataType::kFloat32;
}

bool AmpFromName(const std::string& name, Amp* amp) {
  for (Amp a : {Amp::kOff, Amp::kFloat16, Amp::kBFloat16}) {
    if (name != AmpName(a)) continue;
    *amp = a;
    return true;
  }
  return false;
}

namespace {
std::atomic<Amp> g_amp_default{Amp::kOff};
}  // namespace

void SetAmpDefault(Amp amp) { g_amp_default.store(amp); }
Amp AmpDefault() { return g_amp_default.load(); }

namespace {

// Layer types whose outputs are stored in half precision by default: convolutions, fully
// connected layers and what sits between them, whose outputs are activations of moderate range.
// The others (losses, Softmax, Accuracy, data layers, Exp/Log/Power, normalisations, recurrent
// layers, detection heads) keep float32 tops.
const std::set<std::string>& HalfTopTypes() {
  static const std::set<std::string> types = {"AbsVal",
                                              "BNLL",
                                              "BatchNorm",
                                              "Bias",
                                              "Clip",
                                              "Convolution",
                                              "ConvolutionDepthwise",
                                              "DepthwiseConvolution",
                                              "Deconvolution",
                                              "Dropout",
                                              "ELU",
                                              "Eltwise",
                                              "GELU",
                                              "HardSwish",
                                              "InnerProduct",
                                              "Interp",
                                              "LRN",
                                              "Mish",
                                              "PReLU",
                                              "Pooling",
                                              "ReLU",
                                              "ReLU6",
                                              "SPP",
                                              "Scale",
                                              "Sigmoid",
                                              "Swish",
                                              "TanH",
                                              "Upsample"};
  return types;
}

// Layer types that only move values (their tops hold their bottoms' values): their tops keep the
// storage of their first bottom, so a split label stays float32.
const std::set<std::string>& PassThroughTypes() {
  static const std::set<std::string> types = {"Concat",  "Crop",    "Flatten",
                                              "Permute", "Reshape", "ShuffleChannel",
                                              "Slice",   "Split",   "Tile"};
  return types;
}

bool IsLossType(const std::string& type) {
  return type.size() >= 4 && type.compare(type.size() - 4, 4, "Loss") == 0;
}

}  // namespace

DataType Net::AmpTopStorage(int layer_id, bool is_output) const {
  const LayerParameter& param = filtered_param_.layer(layer_id);
  const DataType half = AmpHalfType(amp_);
  bool weighted = false;  // a loss top: the loss weight (times the loss scale) lives in its diff
  for (float w : param.loss_weight()) weighted |= w != 0;
  if (amp_ == Amp::kOff || weighted || IsLossType(param.type())) return DataType::kFloat32;
  switch (param.amp_param().storage()) {
    case AmpParameter::FLOAT:
      return DataType::kFloat32;
    case AmpParameter::HALF:
      return half;
    case AmpParameter::DEFAULT:
      break;
  }
  // What the net hands out (its outputs) and what comes in (data layers) stay float32.
  if (is_output || bottom_id_vecs_[layer_id].empty()) return DataType::kFloat32;
  if (PassThroughTypes().count(param.type())) return blobs_[bottom_id_vecs_[layer_id][0]]->dtype();
  return HalfTopTypes().count(param.type()) ? half : DataType::kFloat32;
}

void Net::AmpSetUpLayer(int layer_id, const std::set<std::string>& output_names) {
  const std::vector<int>& bottom_ids = bottom_id_vecs_[layer_id];
  for (int t : top_id_vecs_[layer_id]) {
    // An in-place top keeps the storage its producer gave it.
    if (std::find(bottom_ids.begin(), bottom_ids.end(), t) != bottom_ids.end()) continue;
    const DataType storage = AmpTopStorage(layer_id, output_names.count(blob_names_[t]) > 0);
    if (storage == DataType::kFloat32) continue;
    blobs_[t]->set_dtype(storage);
    standins_[t] = std::make_unique<Blob>();
  }
  BlobVec& bottoms = layer_bottoms_[layer_id];
  BlobVec& tops = layer_tops_[layer_id];
  bottoms.clear();
  tops.clear();
  for (int b : bottom_ids) bottoms.push_back(standins_[b] ? standins_[b].get() : blobs_[b].get());
  for (int t : top_id_vecs_[layer_id])
    tops.push_back(standins_[t] ? standins_[t].get() : blobs_[t].get());
}

size_t Net::AmpScratchBytes(const Blob& blob) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(blob.count(), 1)) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

std::vector<int> Net::AmpBlobs(int layer_id) const {
  std::vector<int> ids;
  for (const auto* list : {&bottom_id_vecs_[layer_id], &top_id_vecs_[layer_id]})
    for (int b : *list)
      if (standins_[b] && std::find(ids.begin(), ids.end(), b) == ids.end()) ids.push_back(b);
  return ids;
}

void Net::AmpBind(int layer_id) {
  const std::vector<int> ids = AmpBlobs(layer_id);
  if (ids.empty()) return;
  size_t bytes = 0;
  for (int b : ids) bytes += 2 * AmpScratchBytes(*blobs_[b]);
  if (!amp_scratch_ || amp_scratch_->size() < bytes)
    amp_scratch_ = std::make_shared<SyncedMemory>(bytes);
  size_t offset = 0;
  for (int b : ids) {
    const size_t n = AmpScratchBytes(*blobs_[b]);
    standins_[b]->ReshapeInto(blobs_[b]->shape(), SyncedMemory::View(amp_scratch_, offset, n),
                              SyncedMemory::View(amp_scratch_, offset + n, n));
    offset += 2 * n;
  }
}

namespace {

// Converts `count` values between a blob's memory and its stand-in's, on the net's device.
void Move(bool gpu, int64_t count, SyncedMemory* from, DataType from_type, SyncedMemory* to,
          DataType to_type) {
  if (count == 0) return;
#ifdef CREMA_WITH_CUDA
  if (gpu) return gpu::Convert(count, from_type, from->gpu_data(), to_type, to->mutable_gpu_data());
#endif
  CREMA_ASSERT(!gpu);
  cpu::Convert(count, from_type, from->cpu_data(), to_type, to->mutable_cpu_data());
}

}  // namespace

void Net::AmpBefore(int layer_id, bool backward) {
  if (amp_ == Amp::kOff) return;
  AmpBind(layer_id);
  const bool gpu = device_.is_cuda();
  const auto load = [&](int b, bool diff) {
    Blob& blob = *blobs_[b];
    Blob& standin = *standins_[b];
    Move(gpu, blob.count(), (diff ? blob.diff() : blob.data()).get(), blob.dtype(),
         (diff ? standin.diff() : standin.data()).get(), DataType::kFloat32);
  };
  for (int b : bottom_id_vecs_[layer_id])
    if (standins_[b]) load(b, false);
  if (!backward) return;
  for (int t : top_id_vecs_[layer_id]) {
    if (!standins_[t]) continue;
    load(t, false);
    load(t, true);
  }
}

void Net::AmpAfter(int layer_id, bool backward, const std::vector<bool>* propagate_down) {
  if (amp_ == Amp::kOff) return;
  const bool gpu = device_.is_cuda();
  const auto store = [&](int b, bool diff) {
    Blob& blob = *blobs_[b];
    Blob& standin = *standins_[b];
    if (blob.shape() != standin.shape()) blob.ReshapeLike(standin);
    Move(gpu, blob.count(), (diff ? standin.diff() : standin.data()).get(), DataType::kFloat32,
         (diff ? blob.diff() : blob.data()).get(), blob.dtype());
  };
  if (!backward) {
    for (int t : top_id_vecs_[layer_id])
      if (standins_[t]) store(t, false);
    return;
  }
  const std::vector<int>& bottom_ids = bottom_id_vecs_[layer_id];
  for (size_t j = 0; j < bottom_ids.size(); ++j)
    if (standins_[bottom_ids[j]] && (*propagate_down)[j]) store(bottom_ids[j], true);
}

void Net::ReshapeLayer(int layer_id) {
  if (amp_ != Amp::kOff) AmpBind(layer_id);
  layers_[layer_id]->Reshape(layer_bottoms_[layer_id], layer_tops_[layer_id]);
  for (int t : top_id_vecs_[layer_id])
    if (standins_[t] && blobs_[t]->shape() != standins_[t]->shape())
      blobs_[t]->ReshapeLike(*standins_[t]);
}

void Net::BackwardLayer(int layer_id) {
  AmpBefore(layer_id, true);
  layers_[layer_id]->Backward(layer_tops_[layer_id], bottom_need_backward_[layer_id],
                              layer_bottoms_[layer_id]);
  AmpAfter(layer_id, true, &bottom_need_backward_[layer_id]);
}

void Net::set_loss_scale(double scale) {
  CREMA_ASSERT(scale > 0, scale);
  loss_scale_ = scale;
  for (size_t b = 0; b < blobs_.size(); ++b) {
    const double weight = b < blob_loss_weights_.size() ? blob_loss_weights_[b] : 0;
    if (weight == 0) continue;
    Blob& top = *blobs_[b];
    CREMA_DISPATCH_FLOAT(top.dtype(), T, {
      T* diff = top.mutable_cpu_diff<T>();
      std::fill(diff, diff + top.count(), static_cast<T>(weight * scale));
    });
  }
}

}  // namespace crema
