#include "io/annotated_transform.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "crema/error.hpp"

namespace crema {

std::vector<ObjectBox> ObjectBoxes(const AnnotatedDatum& record) {
  std::vector<ObjectBox> objects;
  for (const AnnotationGroup& group : record.annotation_group())
    for (const Annotation& annotation : group.annotation()) {
      ObjectBox object;
      object.group_label = group.group_label();
      object.instance_id = annotation.instance_id();
      object.box = boxes::FromProto(annotation.bbox());
      object.difficult = annotation.bbox().difficult();
      objects.push_back(object);
    }
  return objects;
}

namespace augment {

using boxes::Box;

float Uniform(std::mt19937* rng, float a, float b) {
  const double unit = static_cast<double>((*rng)()) / 4294967296.0;
  return b <= a ? a : static_cast<float>(a + (static_cast<double>(b) - a) * unit);
}

float Coverage(const Box& a, const Box& b) {
  const float area = boxes::Area(a);
  return area > 0 ? boxes::Area(boxes::Intersect(a, b)) / area : 0.f;
}

Box SampleBox(const Sampler& sampler, std::mt19937* rng) {
  const float scale = Uniform(rng, sampler.min_scale(), sampler.max_scale());
  const float square = scale * scale;
  float lower = std::max(sampler.min_aspect_ratio(), square);
  float upper = std::min(sampler.max_aspect_ratio(), 1 / square);
  // A range outside [s^2, 1/s^2]: its nearest end, so that the box still fits.
  if (lower > upper) lower = upper = std::clamp(sampler.min_aspect_ratio(), square, 1 / square);
  const float aspect_ratio = Uniform(rng, lower, upper);
  const float width = std::min(1.f, scale * std::sqrt(aspect_ratio));
  const float height = std::min(1.f, scale / std::sqrt(aspect_ratio));
  Box box;
  box.xmin = Uniform(rng, 0.f, 1 - width);
  box.ymin = Uniform(rng, 0.f, 1 - height);
  box.xmax = box.xmin + width;
  box.ymax = box.ymin + height;
  return box;
}

bool SatisfySampleConstraint(const Box& sample, const std::vector<Box>& objects,
                             const SampleConstraint& constraint) {
  const auto within = [](bool has_min, float min, bool has_max, float max, float value) {
    return !(has_min && value < min) && !(has_max && value > max);
  };
  const bool jaccard = constraint.has_min_jaccard_overlap() || constraint.has_max_jaccard_overlap();
  const bool sample_coverage =
      constraint.has_min_sample_coverage() || constraint.has_max_sample_coverage();
  const bool object_coverage =
      constraint.has_min_object_coverage() || constraint.has_max_object_coverage();
  if (!jaccard && !sample_coverage && !object_coverage) return true;
  for (const Box& object : objects) {
    if (jaccard && !within(constraint.has_min_jaccard_overlap(), constraint.min_jaccard_overlap(),
                           constraint.has_max_jaccard_overlap(), constraint.max_jaccard_overlap(),
                           boxes::Jaccard(sample, object)))
      continue;
    if (sample_coverage &&
        !within(constraint.has_min_sample_coverage(), constraint.min_sample_coverage(),
                constraint.has_max_sample_coverage(), constraint.max_sample_coverage(),
                Coverage(sample, object)))
      continue;
    if (object_coverage &&
        !within(constraint.has_min_object_coverage(), constraint.min_object_coverage(),
                constraint.has_max_object_coverage(), constraint.max_object_coverage(),
                Coverage(object, sample)))
      continue;
    return true;
  }
  return false;
}

std::vector<Box> GenerateBatchSamples(const std::vector<Box>& objects,
                                      const std::vector<BatchSampler>& samplers,
                                      std::mt19937* rng) {
  std::vector<Box> samples;
  for (const BatchSampler& sampler : samplers) {
    if (!sampler.use_original_image()) continue;
    uint32_t found = 0;
    for (uint32_t trial = 0; trial < sampler.max_trials(); ++trial) {
      if (sampler.has_max_sample() && found >= sampler.max_sample()) break;
      // SSD locates the sample in the whole image, [0, 1]^2: it is the sample itself.
      const Box sample = SampleBox(sampler.sampler(), rng);
      if (SatisfySampleConstraint(sample, objects, sampler.sample_constraint())) {
        ++found;
        samples.push_back(sample);
      }
    }
  }
  return samples;
}

bool MeetEmitConstraint(const Box& crop, const Box& box, const EmitConstraint& constraint) {
  if (constraint.emit_type() == EmitConstraint::CENTER) {
    const float x = (box.xmin + box.xmax) / 2, y = (box.ymin + box.ymax) / 2;
    return x >= crop.xmin && x <= crop.xmax && y >= crop.ymin && y <= crop.ymax;
  }
  return Coverage(box, crop) > constraint.emit_overlap();
}

bool ProjectBox(const Box& crop, const Box& box, Box* projected) {
  if (box.xmin >= crop.xmax || box.xmax <= crop.xmin || box.ymin >= crop.ymax ||
      box.ymax <= crop.ymin)
    return false;
  const float width = crop.xmax - crop.xmin, height = crop.ymax - crop.ymin;
  Box out;
  out.xmin = (box.xmin - crop.xmin) / width;
  out.ymin = (box.ymin - crop.ymin) / height;
  out.xmax = (box.xmax - crop.xmin) / width;
  out.ymax = (box.ymax - crop.ymin) / height;
  *projected = boxes::Clip(out);
  return boxes::Area(*projected) > 0;
}

std::vector<ObjectBox> ProjectObjects(const std::vector<ObjectBox>& objects, const Box& crop,
                                      const EmitConstraint* emit) {
  std::vector<ObjectBox> kept;
  for (const ObjectBox& object : objects) {
    if (emit != nullptr && !MeetEmitConstraint(crop, object.box, *emit)) continue;
    ObjectBox projected = object;
    if (ProjectBox(crop, object.box, &projected.box)) kept.push_back(projected);
  }
  return kept;
}

Box Crop(const Picture& picture, const Box& box, Picture* out) {
  const Box clipped = boxes::Clip(box);
  // SSD's CropImage truncates the pixel coordinates; here the corners are, with a tolerance for
  // float rounding (0.9f * 10 is 9, not 8.99...), and the cut keeps at least one pixel.
  const auto pixel = [](float v, int size) {
    return std::clamp(static_cast<int>(std::floor(v * size + 1e-3f)), 0, size);
  };
  const int w_off = std::min(pixel(clipped.xmin, picture.width), picture.width - 1);
  const int h_off = std::min(pixel(clipped.ymin, picture.height), picture.height - 1);
  const int width = std::max(pixel(clipped.xmax, picture.width) - w_off, 1);
  const int height = std::max(pixel(clipped.ymax, picture.height) - h_off, 1);
  out->height = height;
  out->width = width;
  out->channels = picture.channels;
  out->pixels.resize(static_cast<size_t>(height) * width * picture.channels);
  const size_t row_bytes = static_cast<size_t>(width) * picture.channels;
  for (int y = 0; y < height; ++y)
    std::copy_n(picture.at(h_off + y, w_off), row_bytes, out->at(y, 0));
  Box cut;
  cut.xmin = static_cast<float>(w_off) / picture.width;
  cut.ymin = static_cast<float>(h_off) / picture.height;
  cut.xmax = static_cast<float>(w_off + width) / picture.width;
  cut.ymax = static_cast<float>(h_off + height) / picture.height;
  return cut;
}

void Mirror(std::vector<ObjectBox>* objects) {
  for (ObjectBox& object : *objects) {
    const float xmin = object.box.xmin;
    object.box.xmin = 1 - object.box.xmax;
    object.box.xmax = 1 - xmin;
  }
}

void Expand(const ExpansionParameter& param, const std::vector<float>& fill,
            const EmitConstraint* emit, std::mt19937* rng, Picture* picture,
            std::vector<ObjectBox>* objects) {
  if (Uniform(rng, 0.f, 1.f) > param.prob()) return;
  if (std::fabs(param.max_expand_ratio() - 1.f) < 1e-2f) return;
  const float ratio = Uniform(rng, 1.f, param.max_expand_ratio());
  Picture canvas;
  canvas.height = static_cast<int>(picture->height * ratio);
  canvas.width = static_cast<int>(picture->width * ratio);
  canvas.channels = picture->channels;
  const int h_off = static_cast<int>(
      std::floor(Uniform(rng, 0.f, static_cast<float>(canvas.height - picture->height))));
  const int w_off = static_cast<int>(
      std::floor(Uniform(rng, 0.f, static_cast<float>(canvas.width - picture->width))));
  std::vector<uint8_t> value(static_cast<size_t>(canvas.channels), 0);
  for (int c = 0; c < canvas.channels && !fill.empty(); ++c) {
    const float v = fill[fill.size() == 1 ? 0 : static_cast<size_t>(c) % fill.size()];
    value[c] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
  }
  canvas.pixels.resize(static_cast<size_t>(canvas.height) * canvas.width * canvas.channels);
  for (size_t i = 0; i < canvas.pixels.size(); i += canvas.channels)
    std::copy(value.begin(), value.end(), canvas.pixels.begin() + static_cast<std::ptrdiff_t>(i));
  const size_t row_bytes = static_cast<size_t>(picture->width) * picture->channels;
  for (int y = 0; y < picture->height; ++y)
    std::copy_n(picture->at(y, 0), row_bytes, canvas.at(h_off + y, w_off));
  // The canvas in the picture's coordinates: projecting into it rescales the boxes.
  Box frame;
  frame.xmin = -static_cast<float>(w_off) / picture->width;
  frame.ymin = -static_cast<float>(h_off) / picture->height;
  frame.xmax = static_cast<float>(canvas.width - w_off) / picture->width;
  frame.ymax = static_cast<float>(canvas.height - h_off) / picture->height;
  *objects = ProjectObjects(*objects, frame, emit);
  *picture = std::move(canvas);
}

#ifdef CREMA_WITH_OPENCV
namespace {

cv::Mat AsMat(Picture* picture) {
  return cv::Mat(picture->height, picture->width, CV_8UC(picture->channels),
                 picture->pixels.data());
}

void FromMat(const cv::Mat& mat, Picture* picture) {
  const cv::Mat dense = mat.isContinuous() ? mat : mat.clone();
  picture->height = dense.rows;
  picture->width = dense.cols;
  picture->channels = dense.channels();
  picture->pixels.assign(dense.data, dense.data + dense.total() * dense.elemSize());
}

// Scales one HSV channel (1: saturation) or shifts it (0: hue), saturating, as SSD.
void AdjustHsv(cv::Mat* image, int channel, double alpha, double beta) {
  cv::Mat hsv;
  cv::cvtColor(*image, hsv, cv::COLOR_BGR2HSV);
  std::vector<cv::Mat> planes;
  cv::split(hsv, planes);
  planes[channel].convertTo(planes[channel], -1, alpha, beta);
  cv::merge(planes, hsv);
  cv::cvtColor(hsv, *image, cv::COLOR_HSV2BGR);
}

}  // namespace

bool HasOpenCv() { return true; }

void Distort(const DistortionParameter& param, std::mt19937* rng, Picture* picture) {
  cv::Mat image = AsMat(picture).clone();
  const bool color = image.channels() == 3;
  const auto brightness = [&] {
    if (Uniform(rng, 0.f, 1.f) >= param.brightness_prob()) return;
    const float delta = Uniform(rng, -param.brightness_delta(), param.brightness_delta());
    if (std::fabs(delta) > 0) image.convertTo(image, -1, 1, delta);
  };
  const auto contrast = [&] {
    if (Uniform(rng, 0.f, 1.f) >= param.contrast_prob()) return;
    const float factor = Uniform(rng, param.contrast_lower(), param.contrast_upper());
    if (std::fabs(factor - 1.f) > 1e-3f) image.convertTo(image, -1, factor, 0);
  };
  const auto saturation = [&] {
    if (Uniform(rng, 0.f, 1.f) >= param.saturation_prob()) return;
    const float factor = Uniform(rng, param.saturation_lower(), param.saturation_upper());
    if (color && std::fabs(factor - 1.f) > 1e-3f) AdjustHsv(&image, 1, factor, 0);
  };
  const auto hue = [&] {
    if (Uniform(rng, 0.f, 1.f) >= param.hue_prob()) return;
    const float delta = Uniform(rng, -param.hue_delta(), param.hue_delta());
    if (color && std::fabs(delta) > 0) AdjustHsv(&image, 0, 1, delta);
  };
  const auto order = [&] {
    if (Uniform(rng, 0.f, 1.f) >= param.random_order_prob() || !color) return;
    std::vector<cv::Mat> planes;
    cv::split(image, planes);
    // Fisher-Yates with the item's generator (std::shuffle's is implementation-defined).
    for (int i = static_cast<int>(planes.size()) - 1; i > 0; --i)
      std::swap(planes[i], planes[(*rng)() % static_cast<uint32_t>(i + 1)]);
    cv::merge(planes, image);
  };
  if (Uniform(rng, 0.f, 1.f) > 0.5f) {
    brightness();
    contrast();
    saturation();
    hue();
  } else {
    brightness();
    saturation();
    hue();
    contrast();
  }
  order();
  FromMat(image, picture);
}

void Resize(const ResizeParameter& param, std::mt19937* rng, Picture* picture,
            std::vector<ObjectBox>* objects) {
  if (param.prob() < 1 && Uniform(rng, 0.f, 1.f) >= param.prob()) return;
  int interpolation = cv::INTER_LINEAR;
  if (param.interp_mode_size() > 0) {
    switch (param.interp_mode(static_cast<int>((*rng)() % param.interp_mode_size()))) {
      case ResizeParameter::AREA:
        interpolation = cv::INTER_AREA;
        break;
      case ResizeParameter::NEAREST:
        interpolation = cv::INTER_NEAREST;
        break;
      case ResizeParameter::CUBIC:
        interpolation = cv::INTER_CUBIC;
        break;
      case ResizeParameter::LANCZOS4:
        interpolation = cv::INTER_LANCZOS4;
        break;
      default:
        break;
    }
  }
  const int height = static_cast<int>(param.height()), width = static_cast<int>(param.width());
  const cv::Mat image = AsMat(picture);
  const float aspect = static_cast<float>(picture->width) / picture->height;
  const float target_aspect = static_cast<float>(width) / height;
  cv::Mat out;
  switch (param.resize_mode()) {
    case ResizeParameter::FIT_SMALL_SIZE: {
      // The normalized boxes are unchanged: the whole picture is scaled.
      const cv::Size size = aspect < target_aspect
                                ? cv::Size(width, static_cast<int>(width / aspect))
                                : cv::Size(static_cast<int>(aspect * height), height);
      cv::resize(image, out, size, 0, 0, interpolation);
      break;
    }
    case ResizeParameter::FIT_LARGE_SIZE_AND_PAD: {
      const int channels = picture->channels;
      if (param.pad_value_size() != 0 && param.pad_value_size() != 1 &&
          param.pad_value_size() != channels)
        CREMA_THROW_CONFIG("transform_param.resize_param.pad_value: give one value or one per ",
                           "channel (", channels, "), got ", param.pad_value_size());
      cv::Scalar pad(0, 0, 0, 0);
      for (int c = 0; c < std::min(channels, 4) && param.pad_value_size() > 0; ++c)
        pad[c] = param.pad_value(param.pad_value_size() == 1 ? 0 : c);
      int border = cv::BORDER_CONSTANT;
      if (param.pad_mode() == ResizeParameter::MIRRORED) border = cv::BORDER_REFLECT101;
      if (param.pad_mode() == ResizeParameter::REPEAT_NEAREST) border = cv::BORDER_REPLICATE;
      cv::Mat resized;
      int top = 0, left = 0;
      if (aspect > target_aspect) {
        const int h = std::max(1, static_cast<int>(width / aspect));
        cv::resize(image, resized, cv::Size(width, h), 0, 0, interpolation);
        top = (height - h) / 2;
        cv::copyMakeBorder(resized, out, top, height - h - top, 0, 0, border, pad);
      } else {
        const int w = std::max(1, static_cast<int>(aspect * height));
        cv::resize(image, resized, cv::Size(w, height), 0, 0, interpolation);
        left = (width - w) / 2;
        cv::copyMakeBorder(resized, out, 0, 0, left, width - w - left, border, pad);
      }
      // The padded canvas in the resized picture's coordinates, as Expand's frame.
      boxes::Box frame;
      frame.xmin = -static_cast<float>(left) / resized.cols;
      frame.ymin = -static_cast<float>(top) / resized.rows;
      frame.xmax = static_cast<float>(width - left) / resized.cols;
      frame.ymax = static_cast<float>(height - top) / resized.rows;
      *objects = ProjectObjects(*objects, frame, nullptr);
      break;
    }
    default:
      cv::resize(image, out, cv::Size(width, height), 0, 0, interpolation);
      break;
  }
  FromMat(out, picture);
}

#else

bool HasOpenCv() { return false; }

void Distort(const DistortionParameter&, std::mt19937*, Picture*) {
  CREMA_THROW_CONFIG("transform_param.distort_param needs OpenCV; this crema was built without it");
}

void Resize(const ResizeParameter&, std::mt19937*, Picture*, std::vector<ObjectBox>*) {
  CREMA_THROW_CONFIG("transform_param.resize_param needs OpenCV; this crema was built without it");
}

#endif

}  // namespace augment

namespace {

DataTransformer::Image View(const Picture& picture) {
  DataTransformer::Image image;
  image.channels = picture.channels;
  image.height = picture.height;
  image.width = picture.width;
  image.bytes = picture.pixels.data();
  image.interleaved = true;
  return image;
}

}  // namespace

AnnotatedTransformer::AnnotatedTransformer(const TransformationParameter& param,
                                           const AnnotatedDataParameter& data_param, Phase phase)
    : param_(param),
      samplers_(data_param.batch_sampler().begin(), data_param.batch_sampler().end()),
      phase_(phase),
      base_(param, phase),
      fill_(param.mean_value().begin(), param.mean_value().end()) {}

bool AnnotatedTransformer::NeedsRandom() const {
  return base_.NeedsRandom() || param_.has_distort_param() || param_.has_expand_param() ||
         !samplers_.empty() ||
         (param_.has_resize_param() &&
          (param_.resize_param().prob() < 1 || param_.resize_param().interp_mode_size() > 1));
}

Picture AnnotatedTransformer::Decode(const Datum& datum, std::vector<uint8_t>* pixels,
                                     const std::string& what) const {
  const DataTransformer::Image image = base_.Decode(datum, pixels, what);
  if (image.bytes == nullptr)
    CREMA_THROW_RUNTIME(what, ": AnnotatedData reads 8-bit images (raw `data` or encoded), not ",
                        "float_data");
  Picture picture;
  picture.height = image.height;
  picture.width = image.width;
  picture.channels = image.channels;
  const size_t count = static_cast<size_t>(image.height) * image.width * image.channels;
  if (image.interleaved) {
    if (image.bytes == pixels->data() && pixels->size() == count) {
      picture.pixels = std::move(*pixels);
    } else {
      picture.pixels.assign(image.bytes, image.bytes + count);
    }
  } else {
    picture.pixels.resize(count);
    const size_t plane = static_cast<size_t>(image.height) * image.width;
    for (size_t i = 0; i < plane; ++i)
      for (int c = 0; c < image.channels; ++c)
        picture.pixels[i * image.channels + c] = image.bytes[c * plane + i];
  }
  return picture;
}

AnnotatedTransformer::Sample AnnotatedTransformer::Apply(Picture picture,
                                                         std::vector<ObjectBox> objects,
                                                         uint32_t seed,
                                                         const std::string& what) const {
  std::mt19937 rng(seed);
  Sample sample;
  // The last step's words first, so that they do not depend on how many the others draw.
  for (uint32_t& word : sample.draws.words) word = rng();
  const EmitConstraint* emit = param_.has_emit_constraint() ? &param_.emit_constraint() : nullptr;
  if (param_.has_distort_param()) augment::Distort(param_.distort_param(), &rng, &picture);
  if (param_.has_expand_param())
    augment::Expand(param_.expand_param(), fill_, emit, &rng, &picture, &objects);
  if (!samplers_.empty()) {
    std::vector<boxes::Box> object_boxes;
    for (const ObjectBox& object : objects) object_boxes.push_back(object.box);
    const std::vector<boxes::Box> samples =
        augment::GenerateBatchSamples(object_boxes, samplers_, &rng);
    if (!samples.empty()) {
      const boxes::Box& chosen = samples[rng() % samples.size()];
      Picture cropped;
      const boxes::Box cut = augment::Crop(picture, chosen, &cropped);
      objects = augment::ProjectObjects(objects, cut, emit);
      picture = std::move(cropped);
    }
  }
  if (param_.has_resize_param()) augment::Resize(param_.resize_param(), &rng, &picture, &objects);
  sample.shape = base_.ShapeOf(View(picture), what);
  const DataTransformer::Window window = base_.Choose(picture.height, picture.width, sample.draws);
  boxes::Box frame;
  frame.xmin = static_cast<float>(window.w_off) / picture.width;
  frame.ymin = static_cast<float>(window.h_off) / picture.height;
  frame.xmax = static_cast<float>(window.w_off + window.width) / picture.width;
  frame.ymax = static_cast<float>(window.h_off + window.height) / picture.height;
  objects = augment::ProjectObjects(objects, frame, emit);
  if (window.mirror) augment::Mirror(&objects);
  sample.picture = std::move(picture);
  sample.objects = std::move(objects);
  return sample;
}

template <typename T>
void AnnotatedTransformer::Write(const Sample& sample, T* out) const {
  base_.Transform(View(sample.picture), sample.draws, out);
}

template void AnnotatedTransformer::Write<float>(const Sample&, float*) const;
template void AnnotatedTransformer::Write<double>(const Sample&, double*) const;

}  // namespace crema
