#include "layers/annotated_data/annotated_data_layer.hpp"

#include <algorithm>
#include <utility>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"

namespace crema {
namespace {

bool InUnit(float value) { return value >= 0 && value <= 1; }

}  // namespace

void AnnotatedDataLayer::CheckParams() const {
  const TransformationParameter& param = layer_param_.transform_param();
  CREMA_CHECK_PARAM(param.noise_param().prob() <= 0, "transform_param.noise_param.prob",
                    "> 0 asks for SSD's photometric noise, which crema does not apply; remove "
                    "noise_param or set prob: 0");
  if (param.has_distort_param()) {
    const DistortionParameter& d = param.distort_param();
    const std::pair<float, const char*> probs[] = {{d.brightness_prob(), "brightness_prob"},
                                                   {d.contrast_prob(), "contrast_prob"},
                                                   {d.saturation_prob(), "saturation_prob"},
                                                   {d.hue_prob(), "hue_prob"},
                                                   {d.random_order_prob(), "random_order_prob"}};
    for (const auto& [prob, field] : probs)
      CREMA_CHECK_PARAM(InUnit(prob), StrCat("transform_param.distort_param.", field),
                        "must be in [0, 1], got ", prob);
    CREMA_CHECK_PARAM(d.brightness_delta() >= 0, "transform_param.distort_param.brightness_delta",
                      "must be >= 0, got ", d.brightness_delta());
    CREMA_CHECK_PARAM(d.hue_delta() >= 0, "transform_param.distort_param.hue_delta",
                      "must be >= 0, got ", d.hue_delta());
    CREMA_CHECK_PARAM(d.contrast_prob() == 0 ||
                          (d.contrast_lower() >= 0 && d.contrast_upper() >= d.contrast_lower()),
                      "transform_param.distort_param.contrast_lower",
                      "and contrast_upper must satisfy 0 <= lower <= upper, got ",
                      d.contrast_lower(), " and ", d.contrast_upper());
    CREMA_CHECK_PARAM(d.saturation_prob() == 0 || (d.saturation_lower() >= 0 &&
                                                   d.saturation_upper() >= d.saturation_lower()),
                      "transform_param.distort_param.saturation_lower",
                      "and saturation_upper must satisfy 0 <= lower <= upper, got ",
                      d.saturation_lower(), " and ", d.saturation_upper());
    CREMA_CHECK_PARAM(augment::HasOpenCv(), "transform_param.distort_param",
                      "needs OpenCV; this crema was built without it");
  }
  if (param.has_expand_param()) {
    CREMA_CHECK_PARAM(InUnit(param.expand_param().prob()), "transform_param.expand_param.prob",
                      "must be in [0, 1], got ", param.expand_param().prob());
    CREMA_CHECK_PARAM(param.expand_param().max_expand_ratio() >= 1,
                      "transform_param.expand_param.max_expand_ratio", "must be >= 1, got ",
                      param.expand_param().max_expand_ratio());
  }
  if (param.has_resize_param()) {
    const ResizeParameter& r = param.resize_param();
    CREMA_CHECK_PARAM(r.height() > 0 && r.width() > 0 && r.height() <= 65536 && r.width() <= 65536,
                      "transform_param.resize_param.height",
                      "and width must be in [1, 65536], got ", r.height(), " x ", r.width());
    CREMA_CHECK_PARAM(r.height_scale() == 0 && r.width_scale() == 0,
                      "transform_param.resize_param.height_scale",
                      "and width_scale are not supported (SSD's test-time extrapolation)");
    CREMA_CHECK_PARAM(InUnit(r.prob()), "transform_param.resize_param.prob",
                      "must be in [0, 1], got ", r.prob());
    CREMA_CHECK_PARAM(augment::HasOpenCv(), "transform_param.resize_param",
                      "needs OpenCV; this crema was built without it");
  }
  if (param.has_emit_constraint())
    CREMA_CHECK_PARAM(InUnit(param.emit_constraint().emit_overlap()),
                      "transform_param.emit_constraint.emit_overlap", "must be in [0, 1], got ",
                      param.emit_constraint().emit_overlap());
  const AnnotatedDataParameter& data = layer_param_.annotated_data_param();
  for (int i = 0; i < data.batch_sampler_size(); ++i) {
    const std::string which = StrCat(" (batch_sampler ", i, ")");
    const Sampler& s = data.batch_sampler(i).sampler();
    CREMA_CHECK_PARAM(s.min_scale() > 0 && s.min_scale() <= s.max_scale() && s.max_scale() <= 1,
                      "annotated_data_param.batch_sampler.sampler.min_scale",
                      "and max_scale must satisfy 0 < min_scale <= max_scale <= 1, got ",
                      s.min_scale(), " and ", s.max_scale(), which);
    CREMA_CHECK_PARAM(s.min_aspect_ratio() > 0 && s.min_aspect_ratio() <= s.max_aspect_ratio() &&
                          s.max_aspect_ratio() < 1e30f,
                      "annotated_data_param.batch_sampler.sampler.min_aspect_ratio",
                      "and max_aspect_ratio must satisfy 0 < min <= max, got ",
                      s.min_aspect_ratio(), " and ", s.max_aspect_ratio(), which);
    const SampleConstraint& c = data.batch_sampler(i).sample_constraint();
    const std::pair<float, const char*> bounds[] = {
        {c.min_jaccard_overlap(), "min_jaccard_overlap"},
        {c.max_jaccard_overlap(), "max_jaccard_overlap"},
        {c.min_sample_coverage(), "min_sample_coverage"},
        {c.max_sample_coverage(), "max_sample_coverage"},
        {c.min_object_coverage(), "min_object_coverage"},
        {c.max_object_coverage(), "max_object_coverage"}};
    for (const auto& [bound, field] : bounds)
      CREMA_CHECK_PARAM(InUnit(bound),
                        StrCat("annotated_data_param.batch_sampler.sample_constraint.", field),
                        "must be in [0, 1], got ", bound, which);
  }
}

void AnnotatedDataLayer::SetUpTransform() {
  CheckParams();
  try {
    transform_ = std::make_unique<AnnotatedTransformer>(
        layer_param_.transform_param(), layer_param_.annotated_data_param(), phase_);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("transform_param") + e.what());
  }
  if (transform_->NeedsRandom()) rng_.seed(NextSeed());
}

std::string AnnotatedDataLayer::RandState() const { return EngineState(rng_); }

void AnnotatedDataLayer::SetRandState(const std::string& state) { SetEngineState(state, &rng_); }

void AnnotatedDataLayer::Decode(Item* item) const {
  auto* annotated = static_cast<AnnotatedItem*>(item);
  const std::string what = RecordName(item->key);
  AnnotatedDatum record;
  if (!record.ParseFromString(item->value))
    CREMA_THROW_RUNTIME(what, ": not a valid AnnotatedDatum (", item->value.size(),
                        " bytes; the DB is corrupt or holds something else)");
  const AnnotatedDataParameter& param = layer_param_.annotated_data_param();
  annotated->has_type = record.has_type() || param.has_anno_type();
  if (has_boxes_ == 1 && !annotated->has_type)
    CREMA_THROW_RUNTIME(what, " has no annotation type but the first record has one (set ",
                        "annotated_data_param.anno_type to read it as one)");
  annotated->objects = ObjectBoxes(record);
  annotated->datum.Swap(record.mutable_datum());
  annotated->picture = transform_->Decode(annotated->datum, &annotated->pixels, what);
}

void AnnotatedDataLayer::ShapeTops(const Item& first, const BlobVec& top) {
  const auto& item = static_cast<const AnnotatedItem&>(first);
  has_boxes_ = item.has_type ? 1 : 0;
  // The first record transformed with a fixed seed gives the shape (the layer's generator is
  // left untouched); Forward reshapes the tops like each batch.
  std::vector<int> shape =
      transform_->Apply(item.picture, item.objects, 0, RecordName(item.key)).shape;
  shape[0] = batch_size();
  top[0]->Reshape(shape);
  if (output_labels()) {
    if (has_boxes_)
      top[1]->Reshape(std::vector<int>{1, 1, 1, 8});
    else
      top[1]->Reshape(std::vector<int>{batch_size()});
  }
}

void AnnotatedDataLayer::FillBatch(const std::vector<Item*>& items, Batch* batch) {
  const int num = static_cast<int>(items.size());
  std::vector<uint32_t> seeds(items.size(), 0);
  if (transform_->NeedsRandom())
    for (uint32_t& seed : seeds) seed = rng_();
  workers()->Run(num, [&](int k, int /*worker*/) {
    auto* item = static_cast<AnnotatedItem*>(items[k]);
    item->sample = transform_->Apply(std::move(item->picture), std::move(item->objects), seeds[k],
                                     RecordName(item->key));
  });
  const auto sample = [&](int k) -> const AnnotatedTransformer::Sample& {
    return static_cast<const AnnotatedItem*>(items[k])->sample;
  };
  std::vector<int> shape = sample(0).shape;
  for (int k = 1; k < num; ++k)
    if (!std::equal(shape.begin() + 1, shape.end(), sample(k).shape.begin() + 1))
      CREMA_THROW_RUNTIME(
          RecordName(items[k]->key), " gives an item of ", sample(k).shape[1], " x ",
          sample(k).shape[2], " x ", sample(k).shape[3], " but the batch's first is ", shape[1],
          " x ", shape[2], " x ", shape[3],
          " (all items of a batch must have the same size: use resize_param or crop_size)");
  shape[0] = num;
  batch->data.Reshape(shape);
  const int64_t item_count = batch->data.count(1);
  CREMA_DISPATCH_FLOAT(batch->data.dtype(), T, {
    T* out = batch->data.mutable_cpu_data<T>();
    workers()->Run(
        num, [&](int k, int /*worker*/) { transform_->Write(sample(k), out + k * item_count); });
  });
  if (!output_labels()) return;
  if (!has_boxes_) {
    batch->label.Reshape(std::vector<int>{num});
    CREMA_DISPATCH_FLOAT(batch->label.dtype(), T, {
      T* labels = batch->label.mutable_cpu_data<T>();
      for (int k = 0; k < num; ++k) labels[k] = static_cast<T>(items[k]->datum.label());
    });
    return;
  }
  int boxes = 0;
  for (int k = 0; k < num; ++k) boxes += static_cast<int>(sample(k).objects.size());
  batch->label.Reshape(std::vector<int>{1, 1, std::max(boxes, 1), 8});
  CREMA_DISPATCH_FLOAT(batch->label.dtype(), T, {
    T* row = batch->label.mutable_cpu_data<T>();
    if (boxes == 0) std::fill(row, row + 8, T(-1));
    for (int k = 0; k < num; ++k)
      for (const ObjectBox& object : sample(k).objects) {
        const T values[8] = {static_cast<T>(k),
                             static_cast<T>(object.group_label),
                             static_cast<T>(object.instance_id),
                             static_cast<T>(object.box.xmin),
                             static_cast<T>(object.box.ymin),
                             static_cast<T>(object.box.xmax),
                             static_cast<T>(object.box.ymax),
                             static_cast<T>(object.difficult ? 1 : 0)};
        row = std::copy(values, values + 8, row);
      }
  });
}

CREMA_REGISTER_LAYER(AnnotatedData, AnnotatedDataLayer);

}  // namespace crema
