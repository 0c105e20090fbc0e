#include "layers/detection_evaluate/detection_evaluate_layer.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>

#include "crema/layer_registry.hpp"
#include "io/boxes.hpp"

namespace crema {

namespace {

using boxes::Box;

// A box with the size Caffe-SSD stores beside it (NormalizedBBox.size), which its Jaccard overlap
// in pixels reads instead of recomputing it.
struct SizedBox {
  Box box;
  float size = 0;
  float score = 0;
  bool difficult = false;
};

float PixelArea(const Box& b) {
  if (b.xmax < b.xmin || b.ymax < b.ymin) return 0;
  return (b.xmax - b.xmin + 1) * (b.ymax - b.ymin + 1);
}

// SSD's ScaleBBox: to pixels of a height x width image, the size in pixels (+1 convention).
SizedBox Scale(const Box& b, int height, int width) {
  SizedBox out;
  out.box = {b.xmin * width, b.ymin * height, b.xmax * width, b.ymax * height};
  out.size = (width > 1 || height > 1) ? PixelArea(out.box) : boxes::Area(out.box);
  return out;
}

// SSD's ProjectBBox: `b` in the coordinates of `source` (a part of the unit square), clipped;
// `b` unchanged when it misses `source`.
Box Project(const Box& source, const Box& b) {
  if (b.xmin >= source.xmax || b.xmax <= source.xmin || b.ymin >= source.ymax ||
      b.ymax <= source.ymin)
    return b;
  const float w = source.xmax - source.xmin, h = source.ymax - source.ymin;
  return boxes::Clip({(b.xmin - source.xmin) / w, (b.ymin - source.ymin) / h,
                      (b.xmax - source.xmin) / w, (b.ymax - source.ymin) / h});
}

// SSD's OutputBBox: a normalized box on the original (height, width) image, undoing the data
// layer's resize.
SizedBox ToImage(const Box& b, std::pair<int, int> image_size, const ResizeParameter* resize) {
  const auto [height, width] = image_size;
  if (resize == nullptr) return Scale(boxes::Clip(b), height, width);
  switch (resize->resize_mode()) {
    case ResizeParameter::FIT_LARGE_SIZE_AND_PAD: {
      // The image was fitted into the resize box and padded: its part of the box.
      const float resize_height = static_cast<float>(resize->height());
      const float resize_width = static_cast<float>(resize->width());
      const float aspect = static_cast<float>(width) / static_cast<float>(height);
      Box source{0, 0, 1, 1};
      if (aspect > resize_width / resize_height) {
        const float padding = (resize_height - resize_width / aspect) / 2;
        source.ymin = padding / resize_height;
        source.ymax = 1 - padding / resize_height;
      } else {
        const float padding = (resize_width - resize_height * aspect) / 2;
        source.xmin = padding / resize_width;
        source.xmax = 1 - padding / resize_width;
      }
      return Scale(boxes::Clip(Project(source, b)), height, width);
    }
    case ResizeParameter::FIT_SMALL_SIZE:
      if (resize->height_scale() != 0 && resize->width_scale() != 0) {
        // Scaled to height_scale x width_scale, then clipped to the image; SSD's clip stores the
        // size without the +1.
        SizedBox out = Scale(b, static_cast<int>(resize->height_scale()),
                             static_cast<int>(resize->width_scale()));
        const float w = static_cast<float>(width), h = static_cast<float>(height);
        out.box = {std::clamp(out.box.xmin, 0.f, w), std::clamp(out.box.ymin, 0.f, h),
                   std::clamp(out.box.xmax, 0.f, w), std::clamp(out.box.ymax, 0.f, h)};
        out.size = boxes::Area(out.box);
        return out;
      }
      return Scale(boxes::Clip(b), height, width);
    case ResizeParameter::WARP:
    default:
      return Scale(boxes::Clip(b), height, width);
  }
}

// SSD's JaccardOverlap in pixels: the intersection counts both end pixels; the boxes' sizes are
// the stored ones.
float PixelJaccard(const SizedBox& a, const SizedBox& b) {
  Box inter;  // all zero when the boxes do not meet, as SSD's IntersectBBox
  if (!(b.box.xmin > a.box.xmax || b.box.xmax < a.box.xmin || b.box.ymin > a.box.ymax ||
        b.box.ymax < a.box.ymin))
    inter = {std::max(a.box.xmin, b.box.xmin), std::max(a.box.ymin, b.box.ymin),
             std::min(a.box.xmax, b.box.xmax), std::min(a.box.ymax, b.box.ymax)};
  const float w = inter.xmax - inter.xmin + 1, h = inter.ymax - inter.ymin + 1;
  if (w <= 0 || h <= 0) return 0;
  return w * h / (a.size + b.size - w * h);
}

// Boxes by image, then label.
using BoxesByLabel = std::map<int, std::vector<SizedBox>>;
using BoxesByImage = std::map<int, BoxesByLabel>;

template <typename T>
Box BoxAt(const T* row) {
  return {static_cast<float>(row[0]), static_cast<float>(row[1]), static_cast<float>(row[2]),
          static_cast<float>(row[3])};
}

// The number of classes with a row of positives.
int NumPositiveClasses(int num_classes, int background_label_id) {
  return background_label_id >= 0 && background_label_id < num_classes ? num_classes - 1
                                                                       : num_classes;
}

// Detection rows whose label is not -1 (SSD's count; placeholders have label -1).
int64_t NumValidDetections(const Blob& detections) {
  int64_t valid = 0;
  for (int64_t i = 0; i < detections.shape(2); ++i)
    if (detections.data_at(i * 7 + 1) != -1) ++valid;
  return valid;
}

}  // namespace

void DetectionEvaluateLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DetectionEvaluateParameter& param = layer_param_.detection_evaluate_param();
  CREMA_CHECK_PARAM(param.has_num_classes(), "detection_evaluate_param.num_classes",
                    "must be given");
  CREMA_CHECK_PARAM(param.num_classes() >= 1, "detection_evaluate_param.num_classes",
                    "must be >= 1, got ", param.num_classes());
  num_classes_ = static_cast<int>(param.num_classes());
  background_label_id_ = static_cast<int>(param.background_label_id());
  overlap_threshold_ = param.overlap_threshold();
  CREMA_CHECK_PARAM(overlap_threshold_ > 0, "detection_evaluate_param.overlap_threshold",
                    "must be > 0, got ", overlap_threshold_);
  evaluate_difficult_gt_ = param.evaluate_difficult_gt();
  sizes_.clear();
  count_ = 0;
  if (param.has_name_size_file()) {
    const std::string& path = param.name_size_file();
    std::ifstream in(path);
    if (!in)
      throw RuntimeError(
          ErrorPrefix("detection_evaluate_param.name_size_file") +
          StrCat("cannot open detection_evaluate_param.name_size_file '", path, "'"));
    std::string image_name;
    int height = 0, width = 0;
    while (in >> image_name >> height >> width) {
      if (height <= 0 || width <= 0)
        throw RuntimeError(ErrorPrefix("detection_evaluate_param.name_size_file") +
                           StrCat("'", path, "' line ", sizes_.size() + 1, " (", image_name,
                                  "): height and width must be > 0, got ", height, " ", width));
      sizes_.emplace_back(height, width);
    }
    if (sizes_.empty())
      throw RuntimeError(ErrorPrefix("detection_evaluate_param.name_size_file") +
                         StrCat("'", path, "' lists no \"name height width\" lines"));
    if (param.has_resize_param()) {
      CREMA_CHECK_PARAM(param.resize_param().height() > 0 && param.resize_param().width() > 0,
                        "detection_evaluate_param.resize_param",
                        "needs height and width > 0 to map the boxes back to the images, got ",
                        param.resize_param().height(), " x ", param.resize_param().width());
    }
    LOG(INFO) << "DetectionEvaluate layer \"" << name() << "\": " << sizes_.size()
              << " image sizes from " << path;
  }
}

void DetectionEvaluateLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& detections = *bottom[0];
  const Blob& ground_truth = *bottom[1];
  CREMA_CHECK_SHAPE(detections.num_axes() == 4 && detections.shape(0) == 1 &&
                        detections.shape(1) == 1 && detections.shape(3) == 7,
                    "DetectionEvaluate needs detections (1, 1, D, 7) as DetectionOutput makes "
                    "them, got ",
                    detections.shape_string());
  CREMA_CHECK_SHAPE(ground_truth.num_axes() == 4 && ground_truth.shape(0) == 1 &&
                        ground_truth.shape(1) == 1 && ground_truth.shape(3) == 8,
                    "DetectionEvaluate needs ground truth (1, 1, G, 8) as AnnotatedData makes it, "
                    "got ",
                    ground_truth.shape_string());
  const int64_t rows =
      NumPositiveClasses(num_classes_, background_label_id_) + NumValidDetections(detections);
  top[0]->Reshape({1, 1, static_cast<int>(rows), 5});
}

template <typename T>
void DetectionEvaluateLayer::ForwardT(const BlobVec& bottom, Blob* top) {
  const bool scaled = !sizes_.empty();
  const DetectionEvaluateParameter& param = layer_param_.detection_evaluate_param();
  const ResizeParameter* resize = param.has_resize_param() ? &param.resize_param() : nullptr;

  BoxesByImage detections;
  const T* det_data = bottom[0]->cpu_data<T>();
  for (int i = 0; i < bottom[0]->shape(2); ++i) {
    const T* row = det_data + static_cast<int64_t>(i) * 7;
    const int image = static_cast<int>(row[0]);
    if (image == -1) continue;
    const int label = static_cast<int>(row[1]);
    if (label == background_label_id_)
      CREMA_THROW_RUNTIME(ErrorPrefix(), "detection row ", i, " has the background label ", label,
                          " (detection_evaluate_param.background_label_id)");
    SizedBox det;
    det.box = BoxAt(row + 3);
    det.size = boxes::Area(det.box);
    det.score = static_cast<float>(row[2]);
    detections[image][label].push_back(det);
  }

  BoxesByImage ground_truth;
  std::map<int, int> num_positives;
  const T* gt_data = bottom[1]->cpu_data<T>();
  for (int i = 0; i < bottom[1]->shape(2); ++i) {
    const T* row = gt_data + static_cast<int64_t>(i) * 8;
    const int item = static_cast<int>(row[0]);
    if (item == -1) break;  // AnnotatedData's placeholder: no ground truth in the batch
    const int label = static_cast<int>(row[1]);
    if (label == background_label_id_)
      CREMA_THROW_RUNTIME(ErrorPrefix(), "ground truth row ", i, " has the background label ",
                          label, " (detection_evaluate_param.background_label_id)");
    SizedBox gt;
    gt.box = BoxAt(row + 3);
    gt.size = boxes::Area(gt.box);
    gt.difficult = row[7] != 0;
    ground_truth[item][label].push_back(gt);
    num_positives[label] += (evaluate_difficult_gt_ || !gt.difficult) ? 1 : 0;
  }

  top->Reshape({1, 1,
                static_cast<int>(NumPositiveClasses(num_classes_, background_label_id_) +
                                 NumValidDetections(*bottom[0])),
                5});
  T* top_data = top->mutable_cpu_data<T>();
  std::fill(top_data, top_data + top->count(), T(0));
  T* out = top_data;
  auto emit = [&out](double a, double b, double c, double d, double e) {
    out[0] = static_cast<T>(a);
    out[1] = static_cast<T>(b);
    out[2] = static_cast<T>(c);
    out[3] = static_cast<T>(d);
    out[4] = static_cast<T>(e);
    out += 5;
  };
  for (int c = 0; c < num_classes_; ++c) {
    if (c == background_label_id_) continue;
    const auto it = num_positives.find(c);
    emit(-1, c, it == num_positives.end() ? 0 : it->second, -1, -1);
  }

  for (auto& [image, by_label] : detections) {
    const auto image_gt = ground_truth.find(image);
    for (auto& [label, dets] : by_label) {
      if (label == -1) continue;
      std::vector<SizedBox>* label_gt = nullptr;
      if (image_gt != ground_truth.end()) {
        const auto it = image_gt->second.find(label);
        if (it != image_gt->second.end()) label_gt = &it->second;
      }
      if (label_gt == nullptr) {  // nothing to find: all false positives
        for (const SizedBox& det : dets) emit(image, label, det.score, 0, 1);
        continue;
      }
      std::vector<SizedBox>& gts = *label_gt;
      if (scaled)
        for (SizedBox& gt : gts) {
          const bool difficult = gt.difficult;
          gt = ToImage(gt.box, sizes_[count_], resize);
          gt.difficult = difficult;
        }
      std::vector<bool> taken(gts.size(), false);
      std::stable_sort(dets.begin(), dets.end(),
                       [](const SizedBox& a, const SizedBox& b) { return a.score > b.score; });
      for (const SizedBox& det : dets) {
        const SizedBox box = scaled ? ToImage(det.box, sizes_[count_], resize) : det;
        float best = -1;
        size_t best_j = 0;
        for (size_t j = 0; j < gts.size(); ++j) {
          const float overlap =
              scaled ? PixelJaccard(box, gts[j]) : boxes::Jaccard(box.box, gts[j].box);
          if (overlap > best) {
            best = overlap;
            best_j = j;
          }
        }
        if (best < overlap_threshold_) {
          emit(image, label, det.score, 0, 1);
        } else if (!evaluate_difficult_gt_ && gts[best_j].difficult) {
          emit(image, label, det.score, 0, 0);  // neither: difficult boxes are not evaluated
        } else if (!taken[best_j]) {
          taken[best_j] = true;
          emit(image, label, det.score, 1, 0);
        } else {
          emit(image, label, det.score, 0, 1);  // a second detection of the same box
        }
      }
    }
    if (scaled && ++count_ == sizes_.size()) count_ = 0;
  }
}

void DetectionEvaluateLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(bottom, top[0]));
}

void DetectionEvaluateLayer::BackwardCpu(const BlobVec& top,
                                         const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  // An evaluation: any gradient asked for is zero.
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) bottom[i]->SetDiffZero();
}

CREMA_REGISTER_LAYER(DetectionEvaluate, DetectionEvaluateLayer);

}  // namespace crema
