#include "layers/dummy_data/dummy_data_layer.hpp"

#include <cstdint>

#include "core/filler.hpp"
#include "crema/layer_registry.hpp"

namespace crema {

void DummyDataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DummyDataParameter& param = layer_param_.dummy_data_param();
  const int num_top = static_cast<int>(top.size());
  const int num_filler = param.data_filler_size();
  CREMA_CHECK_PARAM(num_filler == 0 || num_filler == 1 || num_filler == num_top,
                    "dummy_data_param.data_filler",
                    "must be given not at all, once or once per top: ", num_top, " tops vs. ",
                    num_filler, " fillers");
  const bool legacy = param.num_size() > 0 || param.channels_size() > 0 ||
                      param.height_size() > 0 || param.width_size() > 0;
  if (legacy) {
    CREMA_CHECK_PARAM(param.shape_size() == 0, "dummy_data_param.shape",
                      "cannot be combined with the legacy num/channels/height/width");
    const std::pair<const char*, int> sizes[] = {
        {"dummy_data_param.num", param.num_size()},
        {"dummy_data_param.channels", param.channels_size()},
        {"dummy_data_param.height", param.height_size()},
        {"dummy_data_param.width", param.width_size()}};
    for (const auto& [field, size] : sizes)
      CREMA_CHECK_PARAM(size == 1 || size == num_top, field,
                        "must be given once or once per top (with the other legacy dims): ",
                        num_top, " tops vs. ", size, " values");
  } else {
    CREMA_CHECK_PARAM(param.shape_size() == 1 || param.shape_size() == num_top,
                      "dummy_data_param.shape", "must be given once or once per top: ", num_top,
                      " tops vs. ", param.shape_size(), " shapes");
    for (int s = 0; s < param.shape_size(); ++s) {
      const BlobShape& shape = param.shape(s);
      CREMA_CHECK_PARAM(shape.dim_size() <= Blob::kMaxAxes, "dummy_data_param.shape", "has ",
                        shape.dim_size(), " axes; at most ", Blob::kMaxAxes, " are allowed");
      for (int d = 0; d < shape.dim_size(); ++d)
        CREMA_CHECK_PARAM(shape.dim(d) >= 0 && shape.dim(d) <= INT32_MAX, "dummy_data_param.shape",
                          "dim ", d, " of shape ", s, " must be in [0, 2^31), got ", shape.dim(d));
    }
  }

  fillers_.clear();
  if (num_filler == 0) {
    FillerParameter zero;
    zero.set_type("constant");
    zero.set_value(0);
    fillers_.push_back(zero);
  } else {
    fillers_.assign(param.data_filler().begin(), param.data_filler().end());
  }
  static const char* const kKnown[] = {"constant", "uniform", "gaussian", "positive_unitball",
                                       "xavier",   "msra",    "bilinear"};
  refill_.clear();
  for (const FillerParameter& filler : fillers_) {
    bool known = false;
    for (const char* name : kKnown) known = known || filler.type() == name;
    CREMA_CHECK_PARAM(known, "dummy_data_param.data_filler", "has unknown type \"", filler.type(),
                      "\"; known: constant, uniform, gaussian, positive_unitball, xavier, msra, "
                      "bilinear");
    refill_.push_back(filler.type() != "constant");
  }

  auto pick = [](const auto& values, int i) {
    return static_cast<int>(values.size() == 1 ? values.Get(0) : values.Get(i));
  };
  for (int i = 0; i < num_top; ++i) {
    if (top[i]->dtype() != dtype_) top[i]->set_dtype(dtype_);
    if (legacy) {
      top[i]->Reshape(pick(param.num(), i), pick(param.channels(), i), pick(param.height(), i),
                      pick(param.width(), i));
    } else {
      top[i]->Reshape(param.shape(param.shape_size() == 1 ? 0 : i));
    }
  }
  // Constant fillers fill once, here; the others on every Forward (Caffe runs Forward once with
  // the refill flags inverted).
  for (int i = 0; i < num_top; ++i) {
    const int f = fillers_.size() > 1 ? i : 0;
    if (!refill_[f]) FillBlob(fillers_[f], top[i], ErrorPrefix("dummy_data_param.data_filler"));
  }
}

void DummyDataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (int i = 0; i < static_cast<int>(top.size()); ++i) {
    const int f = fillers_.size() > 1 ? i : 0;
    if (refill_[f]) FillBlob(fillers_[f], top[i], ErrorPrefix("dummy_data_param.data_filler"));
  }
}

CREMA_REGISTER_LAYER(DummyData, DummyDataLayer);

}  // namespace crema
