// Legacy-format upgrades, following BVLC Caffe's upgrade_proto (final master) step by step:
//   V0 (`layers { layer { type: "conv" ... } }`) -> V1, padding layers folded into conv/pool;
//   deprecated transformation fields of V1 data layers -> transform_param;
//   V1 (`layers { type: CONVOLUTION blobs_lr: 1 }`) -> V2 (`layer { type: "Convolution" param {}
//   }`); `input` / `input_dim` / `input_shape` -> an Input layer named "input", first in the net;
//   BatchNorm's three param specs -> lr_mult 0 and decay_mult 0 (names kept, as Caffe PR #5184);
//   SolverParameter.solver_type -> SolverParameter.type.
// Where Caffe would abort (LOG(FATAL), CHECK) or silently drop definitions, crema throws
// ConfigError naming the file; where Caffe logs and continues (a V0 field that does not apply to
// its layer type), crema logs a warning and continues too.
#include "net/upgrade.hpp"

#include <glog/logging.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "crema/error.hpp"

namespace crema {
namespace {

namespace pb = google::protobuf;

// Thrown inside the upgrade steps, which do not know the file name; UpgradeNetAsNeeded adds it.
[[noreturn]] void Fail(const std::string& message) { throw ConfigError(message); }

std::string WithSource(const std::string& source, const std::string& message) {
  if (source.empty()) return message;
  return StrCat(source, ": ", message);
}

// ---- V0 -> V1 ----

V1LayerParameter::LayerType UpgradeV0LayerType(const std::string& type) {
  static const std::map<std::string, V1LayerParameter::LayerType> kTypes = {
      {"accuracy", V1LayerParameter::ACCURACY},
      {"bnll", V1LayerParameter::BNLL},
      {"concat", V1LayerParameter::CONCAT},
      {"conv", V1LayerParameter::CONVOLUTION},
      {"data", V1LayerParameter::DATA},
      {"dropout", V1LayerParameter::DROPOUT},
      {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
      {"flatten", V1LayerParameter::FLATTEN},
      {"hdf5_data", V1LayerParameter::HDF5_DATA},
      {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
      {"im2col", V1LayerParameter::IM2COL},
      {"images", V1LayerParameter::IMAGE_DATA},
      {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
      {"innerproduct", V1LayerParameter::INNER_PRODUCT},
      {"lrn", V1LayerParameter::LRN},
      {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
      {"pool", V1LayerParameter::POOLING},
      {"relu", V1LayerParameter::RELU},
      {"sigmoid", V1LayerParameter::SIGMOID},
      {"softmax", V1LayerParameter::SOFTMAX},
      {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
      {"split", V1LayerParameter::SPLIT},
      {"tanh", V1LayerParameter::TANH},
      {"window_data", V1LayerParameter::WINDOW_DATA},
  };
  auto it = kTypes.find(type);
  if (it == kTypes.end()) Fail(StrCat("unknown V0 layer type \"", type, "\""));
  return it->second;
}

// Drops V0 "padding" layers, moving their `pad` into the conv or pool layer that reads their
// output and rewiring that layer's bottom to the padding layer's input.
void FoldV0PaddingLayers(const NetParameter& param, NetParameter* folded) {
  folded->CopyFrom(param);
  folded->clear_layers();
  // Blob name -> index of the layer that last wrote it (-1: a net input).
  std::map<std::string, int> last_writer;
  for (const std::string& input : param.input()) last_writer[input] = -1;
  for (int i = 0; i < param.layers_size(); ++i) {
    const V1LayerParameter& connection = param.layers(i);
    const V0LayerParameter& layer = connection.layer();
    if (layer.type() != "padding") folded->add_layers()->CopyFrom(connection);
    for (int j = 0; j < connection.bottom_size(); ++j) {
      const std::string& blob = connection.bottom(j);
      auto it = last_writer.find(blob);
      if (it == last_writer.end()) {
        Fail(StrCat("V0 layer \"", layer.name(), "\" reads blob \"", blob,
                    "\", which no earlier layer or input produces"));
      }
      if (it->second < 0) continue;
      const V1LayerParameter& source = param.layers(it->second);
      if (source.layer().type() != "padding") continue;
      if (layer.type() != "conv" && layer.type() != "pool") {
        Fail(StrCat("V0 padding layer \"", source.layer().name(), "\" feeds layer \"", layer.name(),
                    "\" of type \"", layer.type(),
                    "\"; only conv and pool layers can absorb padding"));
      }
      if (connection.bottom_size() != 1 || source.bottom_size() != 1 || source.top_size() != 1) {
        Fail(StrCat("V0 padding layer \"", source.layer().name(), "\" and layer \"", layer.name(),
                    "\" must each have exactly one bottom (and the padding layer one top)"));
      }
      V1LayerParameter* absorbing = folded->mutable_layers(folded->layers_size() - 1);
      absorbing->mutable_layer()->set_pad(source.layer().pad());
      absorbing->set_bottom(j, source.bottom(0));
    }
    for (const std::string& top : connection.top()) last_writer[top] = i;
  }
}

// Collects V0 fields that do not apply to their layer type; Caffe logs each and continues.
class V0Mismatches {
 public:
  explicit V0Mismatches(const std::string& layer_name) : layer_name_(layer_name) {}
  void Add(const char* field, const std::string& type) {
    LOG(WARNING) << "V0 layer \"" << layer_name_ << "\": field " << field
                 << " does not apply to layer type \"" << type << "\"; ignored";
  }

 private:
  std::string layer_name_;
};

void UpgradeV0LayerParameter(const V1LayerParameter& connection, V1LayerParameter* out) {
  out->Clear();
  out->mutable_bottom()->CopyFrom(connection.bottom());
  out->mutable_top()->CopyFrom(connection.top());
  if (!connection.has_layer()) {
    // A V0 net's `layers` entries are pure connections; a V1 definition in their midst would be
    // silently dropped by Caffe.
    if (connection.has_type() || connection.has_name()) {
      Fail(StrCat("layer \"", connection.name(),
                  "\" mixes the V1 `layers` format with V0 `layers { layer { ... } }` entries"));
    }
    return;
  }
  const V0LayerParameter& v0 = connection.layer();
  const std::string& type = v0.type();
  V0Mismatches mismatch(v0.name());
  const bool conv = type == "conv", pool = type == "pool", ip = type == "innerproduct";
  const bool data = type == "data", images = type == "images", window = type == "window_data";
  const bool hdf5 = type == "hdf5_data", lrn = type == "lrn";

  if (v0.has_name()) out->set_name(v0.name());
  if (v0.has_type()) out->set_type(UpgradeV0LayerType(type));
  out->mutable_blobs()->CopyFrom(v0.blobs());
  out->mutable_blobs_lr()->CopyFrom(v0.blobs_lr());
  out->mutable_weight_decay()->CopyFrom(v0.weight_decay());

  if (v0.has_num_output()) {
    if (conv)
      out->mutable_convolution_param()->set_num_output(v0.num_output());
    else if (ip)
      out->mutable_inner_product_param()->set_num_output(v0.num_output());
    else
      mismatch.Add("num_output", type);
  }
  if (v0.has_biasterm()) {
    if (conv)
      out->mutable_convolution_param()->set_bias_term(v0.biasterm());
    else if (ip)
      out->mutable_inner_product_param()->set_bias_term(v0.biasterm());
    else
      mismatch.Add("biasterm", type);
  }
  if (v0.has_weight_filler()) {
    if (conv)
      out->mutable_convolution_param()->mutable_weight_filler()->CopyFrom(v0.weight_filler());
    else if (ip)
      out->mutable_inner_product_param()->mutable_weight_filler()->CopyFrom(v0.weight_filler());
    else
      mismatch.Add("weight_filler", type);
  }
  if (v0.has_bias_filler()) {
    if (conv)
      out->mutable_convolution_param()->mutable_bias_filler()->CopyFrom(v0.bias_filler());
    else if (ip)
      out->mutable_inner_product_param()->mutable_bias_filler()->CopyFrom(v0.bias_filler());
    else
      mismatch.Add("bias_filler", type);
  }
  if (v0.has_pad()) {
    if (conv)
      out->mutable_convolution_param()->add_pad(v0.pad());
    else if (pool)
      out->mutable_pooling_param()->set_pad(v0.pad());
    else
      mismatch.Add("pad", type);
  }
  if (v0.has_kernelsize()) {
    if (conv)
      out->mutable_convolution_param()->add_kernel_size(v0.kernelsize());
    else if (pool)
      out->mutable_pooling_param()->set_kernel_size(v0.kernelsize());
    else
      mismatch.Add("kernelsize", type);
  }
  if (v0.has_group()) {
    if (conv)
      out->mutable_convolution_param()->set_group(v0.group());
    else
      mismatch.Add("group", type);
  }
  if (v0.has_stride()) {
    if (conv)
      out->mutable_convolution_param()->add_stride(v0.stride());
    else if (pool)
      out->mutable_pooling_param()->set_stride(v0.stride());
    else
      mismatch.Add("stride", type);
  }
  if (v0.has_pool()) {
    if (pool) {
      switch (v0.pool()) {
        case V0LayerParameter::MAX:
          out->mutable_pooling_param()->set_pool(PoolingParameter::MAX);
          break;
        case V0LayerParameter::AVE:
          out->mutable_pooling_param()->set_pool(PoolingParameter::AVE);
          break;
        case V0LayerParameter::STOCHASTIC:
          out->mutable_pooling_param()->set_pool(PoolingParameter::STOCHASTIC);
          break;
      }
    } else {
      mismatch.Add("pool", type);
    }
  }
  if (v0.has_dropout_ratio()) {
    if (type == "dropout")
      out->mutable_dropout_param()->set_dropout_ratio(v0.dropout_ratio());
    else
      mismatch.Add("dropout_ratio", type);
  }
  if (v0.has_local_size()) {
    if (lrn)
      out->mutable_lrn_param()->set_local_size(v0.local_size());
    else
      mismatch.Add("local_size", type);
  }
  if (v0.has_alpha()) {
    if (lrn)
      out->mutable_lrn_param()->set_alpha(v0.alpha());
    else
      mismatch.Add("alpha", type);
  }
  if (v0.has_beta()) {
    if (lrn)
      out->mutable_lrn_param()->set_beta(v0.beta());
    else
      mismatch.Add("beta", type);
  }
  if (v0.has_k()) {
    if (lrn)
      out->mutable_lrn_param()->set_k(v0.k());
    else
      mismatch.Add("k", type);
  }
  if (v0.has_source()) {
    if (data)
      out->mutable_data_param()->set_source(v0.source());
    else if (hdf5)
      out->mutable_hdf5_data_param()->set_source(v0.source());
    else if (images)
      out->mutable_image_data_param()->set_source(v0.source());
    else if (window)
      out->mutable_window_data_param()->set_source(v0.source());
    else if (type == "infogain_loss")
      out->mutable_infogain_loss_param()->set_source(v0.source());
    else
      mismatch.Add("source", type);
  }
  // Transformation fields go to transform_param whatever the type, as in Caffe.
  if (v0.has_scale()) out->mutable_transform_param()->set_scale(v0.scale());
  if (v0.has_meanfile()) out->mutable_transform_param()->set_mean_file(v0.meanfile());
  if (v0.has_cropsize()) out->mutable_transform_param()->set_crop_size(v0.cropsize());
  if (v0.has_mirror()) out->mutable_transform_param()->set_mirror(v0.mirror());
  if (v0.has_batchsize()) {
    if (data)
      out->mutable_data_param()->set_batch_size(v0.batchsize());
    else if (hdf5)
      out->mutable_hdf5_data_param()->set_batch_size(v0.batchsize());
    else if (images)
      out->mutable_image_data_param()->set_batch_size(v0.batchsize());
    else if (window)
      out->mutable_window_data_param()->set_batch_size(v0.batchsize());
    else
      mismatch.Add("batchsize", type);
  }
  if (v0.has_rand_skip()) {
    if (data)
      out->mutable_data_param()->set_rand_skip(v0.rand_skip());
    else if (images)
      out->mutable_image_data_param()->set_rand_skip(v0.rand_skip());
    else
      mismatch.Add("rand_skip", type);
  }
  if (v0.has_shuffle_images()) {
    if (images)
      out->mutable_image_data_param()->set_shuffle(v0.shuffle_images());
    else
      mismatch.Add("shuffle_images", type);
  }
  if (v0.has_new_height()) {
    if (images)
      out->mutable_image_data_param()->set_new_height(v0.new_height());
    else
      mismatch.Add("new_height", type);
  }
  if (v0.has_new_width()) {
    if (images)
      out->mutable_image_data_param()->set_new_width(v0.new_width());
    else
      mismatch.Add("new_width", type);
  }
  // new_num / new_channels never had a V1 counterpart (Caffe drops them too).
  if (v0.has_new_num()) mismatch.Add("new_num", type);
  if (v0.has_new_channels()) mismatch.Add("new_channels", type);
  if (v0.has_concat_dim()) {
    if (type == "concat")
      out->mutable_concat_param()->set_concat_dim(v0.concat_dim());
    else
      mismatch.Add("concat_dim", type);
  }
  if (v0.has_det_fg_threshold()) {
    if (window)
      out->mutable_window_data_param()->set_fg_threshold(v0.det_fg_threshold());
    else
      mismatch.Add("det_fg_threshold", type);
  }
  if (v0.has_det_bg_threshold()) {
    if (window)
      out->mutable_window_data_param()->set_bg_threshold(v0.det_bg_threshold());
    else
      mismatch.Add("det_bg_threshold", type);
  }
  if (v0.has_det_fg_fraction()) {
    if (window)
      out->mutable_window_data_param()->set_fg_fraction(v0.det_fg_fraction());
    else
      mismatch.Add("det_fg_fraction", type);
  }
  if (v0.has_det_context_pad()) {
    if (window)
      out->mutable_window_data_param()->set_context_pad(v0.det_context_pad());
    else
      mismatch.Add("det_context_pad", type);
  }
  if (v0.has_det_crop_mode()) {
    if (window)
      out->mutable_window_data_param()->set_crop_mode(v0.det_crop_mode());
    else
      mismatch.Add("det_crop_mode", type);
  }
  if (v0.has_hdf5_output_param()) {
    if (type == "hdf5_output")
      out->mutable_hdf5_output_param()->CopyFrom(v0.hdf5_output_param());
    else
      mismatch.Add("hdf5_output_param", type);
  }
}

// ---- V1 -> V2 ----

void UpgradeV1LayerParameter(const V1LayerParameter& v1, LayerParameter* out) {
  out->Clear();
  if (v1.has_layer()) {
    Fail(StrCat("layer \"", v1.name(), "\" still holds a V0 `layer` definition"));
  }
  out->mutable_bottom()->CopyFrom(v1.bottom());
  out->mutable_top()->CopyFrom(v1.top());
  if (v1.has_name()) out->set_name(v1.name());
  out->mutable_include()->CopyFrom(v1.include());
  out->mutable_exclude()->CopyFrom(v1.exclude());
  if (v1.has_type()) out->set_type(UpgradeV1LayerType(v1.type()));
  out->mutable_blobs()->CopyFrom(v1.blobs());

  // param names, blob_share_mode, blobs_lr and weight_decay are parallel lists that together
  // become one ParamSpec per learnable blob.
  auto spec = [out](int i) {
    while (out->param_size() <= i) out->add_param();
    return out->mutable_param(i);
  };
  for (int i = 0; i < v1.param_size(); ++i) spec(i)->set_name(v1.param(i));
  for (int i = 0; i < v1.blob_share_mode_size(); ++i) {
    spec(i)->set_share_mode(v1.blob_share_mode(i) == V1LayerParameter::PERMISSIVE
                                ? ParamSpec::PERMISSIVE
                                : ParamSpec::STRICT);
  }
  for (int i = 0; i < v1.blobs_lr_size(); ++i) spec(i)->set_lr_mult(v1.blobs_lr(i));
  for (int i = 0; i < v1.weight_decay_size(); ++i) spec(i)->set_decay_mult(v1.weight_decay(i));
  out->mutable_loss_weight()->CopyFrom(v1.loss_weight());

  // Every *_param message (transform_param and loss_param included) has a namesake of the same
  // type in LayerParameter; copy by reflection so none can be forgotten.
  const pb::Descriptor* v1_descriptor = V1LayerParameter::descriptor();
  const pb::Descriptor* v2_descriptor = LayerParameter::descriptor();
  const pb::Reflection* v1_reflection = v1.GetReflection();
  const pb::Reflection* v2_reflection = out->GetReflection();
  for (int f = 0; f < v1_descriptor->field_count(); ++f) {
    const pb::FieldDescriptor* field = v1_descriptor->field(f);
    if (field->type() != pb::FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) continue;
    if (field->name() == "layer") continue;
    if (!v1_reflection->HasField(v1, field)) continue;
    const pb::FieldDescriptor* target = v2_descriptor->FindFieldByName(field->name());
    CREMA_ASSERT(target != nullptr && target->message_type() == field->message_type(),
                 "V1LayerParameter.", field->name(), " has no LayerParameter counterpart");
    v2_reflection->MutableMessage(out, target)->CopyFrom(v1_reflection->GetMessage(v1, field));
  }
}

// ---- data transformation ----

template <typename P>
bool HasLegacyTransform(const P& p) {
  return p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror();
}

template <typename P>
void MoveLegacyTransform(P* p, TransformationParameter* transform) {
  if (p->has_scale()) transform->set_scale(p->scale());
  if (p->has_mean_file()) transform->set_mean_file(p->mean_file());
  if (p->has_crop_size()) transform->set_crop_size(p->crop_size());
  if (p->has_mirror()) transform->set_mirror(p->mirror());
  p->clear_scale();
  p->clear_mean_file();
  p->clear_crop_size();
  p->clear_mirror();
}

bool LayerNeedsDataUpgrade(const V1LayerParameter& layer) {
  switch (layer.type()) {
    case V1LayerParameter::DATA:
      return HasLegacyTransform(layer.data_param());
    case V1LayerParameter::IMAGE_DATA:
      return HasLegacyTransform(layer.image_data_param());
    case V1LayerParameter::WINDOW_DATA:
      return HasLegacyTransform(layer.window_data_param());
    default:
      return false;
  }
}

// ---- solver ----

const char* SolverTypeName(SolverParameter::SolverType type) {
  switch (type) {
    case SolverParameter::SGD:
      return "SGD";
    case SolverParameter::NESTEROV:
      return "Nesterov";
    case SolverParameter::ADAGRAD:
      return "AdaGrad";
    case SolverParameter::RMSPROP:
      return "RMSProp";
    case SolverParameter::ADADELTA:
      return "AdaDelta";
    case SolverParameter::ADAM:
      return "Adam";
  }
  Fail(StrCat("unknown solver_type ", static_cast<int>(type)));
}

}  // namespace

bool NetNeedsV0ToV1Upgrade(const NetParameter& param) {
  for (const V1LayerParameter& layer : param.layers()) {
    if (layer.has_layer()) return true;
  }
  return false;
}

bool NetNeedsV1ToV2Upgrade(const NetParameter& param) { return param.layers_size() > 0; }

bool NetNeedsDataUpgrade(const NetParameter& param) {
  for (const V1LayerParameter& layer : param.layers()) {
    if (LayerNeedsDataUpgrade(layer)) return true;
  }
  return false;
}

bool NetNeedsInputUpgrade(const NetParameter& param) {
  return param.input_size() > 0 || param.input_dim_size() > 0 || param.input_shape_size() > 0;
}

bool NetNeedsBatchNormUpgrade(const NetParameter& param) {
  for (const LayerParameter& layer : param.layer()) {
    if (layer.type() == "BatchNorm" && layer.param_size() == 3) return true;
  }
  return false;
}

bool NetNeedsUpgrade(const NetParameter& param) {
  return NetNeedsV0ToV1Upgrade(param) || NetNeedsV1ToV2Upgrade(param) ||
         NetNeedsDataUpgrade(param) || NetNeedsInputUpgrade(param) ||
         NetNeedsBatchNormUpgrade(param);
}

void UpgradeV0Net(const NetParameter& v0_param, NetParameter* v1_param) {
  NetParameter folded;
  FoldV0PaddingLayers(v0_param, &folded);
  // Net-level fields (name, input, input_dim, force_backward, ...) carry over unchanged.
  NetParameter result(folded);
  result.clear_layers();
  for (const V1LayerParameter& layer : folded.layers()) {
    UpgradeV0LayerParameter(layer, result.add_layers());
  }
  v1_param->Swap(&result);
}

void UpgradeV1Net(const NetParameter& v1_param, NetParameter* v2_param) {
  if (v1_param.layer_size() > 0) {
    // Caffe would ignore the `layer` entries; dropping definitions silently is worse than asking.
    Fail(StrCat("the net uses both `layer` (", v1_param.layer_size(), ") and legacy `layers` (",
                v1_param.layers_size(), ") entries; use one format"));
  }
  NetParameter result(v1_param);
  result.clear_layers();
  result.clear_layer();
  for (int i = 0; i < v1_param.layers_size(); ++i) {
    try {
      UpgradeV1LayerParameter(v1_param.layers(i), result.add_layer());
    } catch (const ConfigError& e) {
      Fail(StrCat("layers[", i, "]: ", e.what()));
    }
  }
  v2_param->Swap(&result);
}

void UpgradeNetDataTransformation(NetParameter* param) {
  for (V1LayerParameter& layer : *param->mutable_layers()) {
    if (!LayerNeedsDataUpgrade(layer)) continue;
    TransformationParameter* transform = layer.mutable_transform_param();
    switch (layer.type()) {
      case V1LayerParameter::DATA:
        MoveLegacyTransform(layer.mutable_data_param(), transform);
        break;
      case V1LayerParameter::IMAGE_DATA:
        MoveLegacyTransform(layer.mutable_image_data_param(), transform);
        break;
      case V1LayerParameter::WINDOW_DATA:
        MoveLegacyTransform(layer.mutable_window_data_param(), transform);
        break;
      default:
        break;
    }
  }
}

void UpgradeNetInput(NetParameter* param) {
  const int inputs = param->input_size();
  const bool has_shape = param->input_shape_size() > 0;
  const bool has_dim = param->input_dim_size() > 0;
  if (has_shape && has_dim) Fail("give either input_shape or the deprecated input_dim, not both");
  if (inputs == 0 && (has_shape || has_dim)) {
    Fail(StrCat(has_shape ? "input_shape" : "input_dim", " is given without any `input` name"));
  }
  if (has_shape && param->input_shape_size() != inputs) {
    Fail(StrCat("input_shape has ", param->input_shape_size(), " entries for ", inputs,
                " input(s); give one per input"));
  }
  if (has_dim && param->input_dim_size() != 4 * inputs) {
    Fail(StrCat("input_dim has ", param->input_dim_size(), " values for ", inputs,
                " input(s); give 4 (num, channels, height, width) per input"));
  }
  // An input without a shape is a legacy caffemodel's: dropping the field is enough.
  if (has_shape || has_dim) {
    LayerParameter input_layer;
    input_layer.set_name("input");
    input_layer.set_type("Input");
    InputParameter* input_param = input_layer.mutable_input_param();
    for (int i = 0; i < inputs; ++i) {
      input_layer.add_top(param->input(i));
      BlobShape* shape = input_param->add_shape();
      if (has_shape) {
        shape->CopyFrom(param->input_shape(i));
      } else {
        for (int j = 4 * i; j < 4 * i + 4; ++j) shape->add_dim(param->input_dim(j));
      }
    }
    // First in the net, so every layer that reads an input comes after it.
    auto* layers = param->mutable_layer();
    layers->Add()->Swap(&input_layer);
    for (int i = layers->size() - 1; i > 0; --i) layers->SwapElements(i, i - 1);
  }
  param->clear_input();
  param->clear_input_shape();
  param->clear_input_dim();
}

void UpgradeNetBatchNorm(NetParameter* param) {
  // The old BatchNorm definition asked for three param specs; the statistics are not learned, so
  // keep the specs (their names may share statistics between layers) but zero their rates.
  for (LayerParameter& layer : *param->mutable_layer()) {
    if (layer.type() != "BatchNorm" || layer.param_size() != 3) continue;
    for (ParamSpec& spec : *layer.mutable_param()) {
      spec.set_lr_mult(0.f);
      spec.set_decay_mult(0.f);
    }
  }
}

const char* UpgradeV1LayerType(V1LayerParameter::LayerType type) {
  switch (type) {
    case V1LayerParameter::NONE:
      return "";
    case V1LayerParameter::ABSVAL:
      return "AbsVal";
    case V1LayerParameter::ACCURACY:
      return "Accuracy";
    case V1LayerParameter::ARGMAX:
      return "ArgMax";
    case V1LayerParameter::BNLL:
      return "BNLL";
    case V1LayerParameter::CONCAT:
      return "Concat";
    case V1LayerParameter::CONTRASTIVE_LOSS:
      return "ContrastiveLoss";
    case V1LayerParameter::CONVOLUTION:
      return "Convolution";
    case V1LayerParameter::DATA:
      return "Data";
    case V1LayerParameter::DECONVOLUTION:
      return "Deconvolution";
    case V1LayerParameter::DROPOUT:
      return "Dropout";
    case V1LayerParameter::DUMMY_DATA:
      return "DummyData";
    case V1LayerParameter::EUCLIDEAN_LOSS:
      return "EuclideanLoss";
    case V1LayerParameter::ELTWISE:
      return "Eltwise";
    case V1LayerParameter::EXP:
      return "Exp";
    case V1LayerParameter::FLATTEN:
      return "Flatten";
    case V1LayerParameter::HDF5_DATA:
      return "HDF5Data";
    case V1LayerParameter::HDF5_OUTPUT:
      return "HDF5Output";
    case V1LayerParameter::HINGE_LOSS:
      return "HingeLoss";
    case V1LayerParameter::IM2COL:
      return "Im2col";
    case V1LayerParameter::IMAGE_DATA:
      return "ImageData";
    case V1LayerParameter::INFOGAIN_LOSS:
      return "InfogainLoss";
    case V1LayerParameter::INNER_PRODUCT:
      return "InnerProduct";
    case V1LayerParameter::LRN:
      return "LRN";
    case V1LayerParameter::MEMORY_DATA:
      return "MemoryData";
    case V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS:
      return "MultinomialLogisticLoss";
    case V1LayerParameter::MVN:
      return "MVN";
    case V1LayerParameter::POOLING:
      return "Pooling";
    case V1LayerParameter::POWER:
      return "Power";
    case V1LayerParameter::RELU:
      return "ReLU";
    case V1LayerParameter::SIGMOID:
      return "Sigmoid";
    case V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS:
      return "SigmoidCrossEntropyLoss";
    case V1LayerParameter::SILENCE:
      return "Silence";
    case V1LayerParameter::SOFTMAX:
      return "Softmax";
    case V1LayerParameter::SOFTMAX_LOSS:
      return "SoftmaxWithLoss";
    case V1LayerParameter::SPLIT:
      return "Split";
    case V1LayerParameter::SLICE:
      return "Slice";
    case V1LayerParameter::TANH:
      return "TanH";
    case V1LayerParameter::WINDOW_DATA:
      return "WindowData";
    case V1LayerParameter::THRESHOLD:
      return "Threshold";
  }
  return "";
}

namespace {

// One line for everything upgraded in `source`: a warning when a deprecated format was read
// (saving the file in the current format silences it), else information.
void LogUpgrades(const std::string& source, const std::vector<std::string>& steps, bool deprecated,
                 const char* kind) {
  if (steps.empty()) return;
  std::string line = StrCat(source, ": upgraded a legacy ", kind, ": ");
  for (size_t i = 0; i < steps.size(); ++i) line += (i ? "; " : "") + steps[i];
  if (deprecated) {
    LOG(WARNING) << line << " (`crema upgrade " << source
                 << " NEW` saves it in the current format)";
  } else {
    LOG(INFO) << line;
  }
}

}  // namespace

bool UpgradeNetAsNeeded(const std::string& source, NetParameter* param,
                        std::vector<std::string>* steps) {
  std::vector<std::string> done;
  bool deprecated = false;
  auto record = [&](const std::string& step, bool is_deprecated) {
    done.push_back(step);
    deprecated |= is_deprecated;
  };
  try {
    if (NetNeedsV0ToV1Upgrade(*param)) {
      NetParameter original(*param);
      UpgradeV0Net(original, param);
      record("V0 layer format (layers { layer {} }) to V1", true);
    }
    if (NetNeedsDataUpgrade(*param)) {
      UpgradeNetDataTransformation(param);
      record(
          "data layers' transformation fields (scale, mean_file, crop_size, mirror) moved "
          "into transform_param",
          true);
    }
    if (NetNeedsV1ToV2Upgrade(*param)) {
      NetParameter original(*param);
      UpgradeV1Net(original, param);
      record("V1 layer format (`layers` with enum types, blobs_lr, weight_decay) to `layer`", true);
    }
    if (NetNeedsInputUpgrade(*param)) {
      const bool has_shapes = param->input_dim_size() > 0 || param->input_shape_size() > 0;
      UpgradeNetInput(param);
      if (has_shapes)
        record("input/input_dim/input_shape fields to an Input layer named \"input\"", true);
      else
        record("deprecated `input` names without shapes dropped", false);
    }
    if (NetNeedsBatchNormUpgrade(*param)) {
      UpgradeNetBatchNorm(param);
      record(
          "BatchNorm param specs set to lr_mult 0, decay_mult 0 (its statistics are not "
          "learned)",
          false);
    }
  } catch (const ConfigError& e) {
    throw ConfigError(WithSource(source, StrCat("cannot upgrade legacy net: ", e.what())));
  }
  if (steps)
    steps->insert(steps->end(), done.begin(), done.end());
  else
    LogUpgrades(source, done, deprecated, "net");
  return !done.empty();
}

bool SolverNeedsTypeUpgrade(const SolverParameter& param) { return param.has_solver_type(); }

bool UpgradeSolverAsNeeded(const std::string& source, SolverParameter* param,
                           std::vector<std::string>* steps) {
  std::vector<std::string> done;
  if (SolverNeedsTypeUpgrade(*param)) {
    const std::string type = SolverTypeName(param->solver_type());
    if (param->has_type() && param->type() != type) {
      throw ConfigError(WithSource(
          source,
          StrCat("solver_type: ", SolverParameter::SolverType_Name(param->solver_type()),
                 " (deprecated) and type: \"", param->type(), "\" disagree; keep only `type`")));
    }
    param->set_type(type);
    param->clear_solver_type();
    done.push_back(StrCat("solver_type enum to type: \"", type, "\""));
  }
  // Nets given inline are upgraded too (Caffe upgrades only nets read from files).
  auto upgrade_inline = [&](const std::string& field, NetParameter* net) {
    if (!NetNeedsUpgrade(*net)) return;
    std::vector<std::string> net_steps;
    UpgradeNetAsNeeded(StrCat(source, " (", field, ")"), net, &net_steps);
    for (const std::string& step : net_steps) done.push_back(StrCat(field, ": ", step));
  };
  if (param->has_net_param()) upgrade_inline("net_param", param->mutable_net_param());
  if (param->has_train_net_param())
    upgrade_inline("train_net_param", param->mutable_train_net_param());
  for (int i = 0; i < param->test_net_param_size(); ++i) {
    upgrade_inline(StrCat("test_net_param[", i, "]"), param->mutable_test_net_param(i));
  }
  if (steps)
    steps->insert(steps->end(), done.begin(), done.end());
  else
    LogUpgrades(source, done, true, "solver");
  return !done.empty();
}

void UpgradeSnapshotPrefix(const std::string& solver_file, SolverParameter* param) {
  namespace fs = std::filesystem;
  const fs::path file(solver_file);
  std::error_code ec;
  if (param->snapshot_prefix().empty()) {
    param->set_snapshot_prefix(fs::path(file).replace_extension().string());
    LOG(INFO) << "snapshot_prefix was not set; using " << param->snapshot_prefix();
  } else if (fs::is_directory(param->snapshot_prefix(), ec)) {
    param->set_snapshot_prefix((fs::path(param->snapshot_prefix()) / file.stem()).string());
    LOG(INFO) << "snapshot_prefix is a folder; using " << param->snapshot_prefix();
  }
}

}  // namespace crema
