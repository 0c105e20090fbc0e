#include "layers/window_data/window_data_layer.hpp"

#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "io/data_transformer.hpp"
#include "io/input_checks.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace crema {

void WindowDataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const WindowDataParameter& param = layer_param_.window_data_param();
  const TransformationParameter& transform = layer_param_.transform_param();
  source_ = param.source();
  CREMA_CHECK_PARAM(!source_.empty(), "window_data_param.source", "is required (the window file)");
  CREMA_CHECK_PARAM(param.batch_size() > 0 && param.batch_size() <= INT32_MAX,
                    "window_data_param.batch_size", "must be > 0, got ", param.batch_size());
  CREMA_CHECK_PARAM(
      transform.crop_size() > 0 && transform.crop_size() <= INT32_MAX, "transform_param.crop_size",
      "must be > 0 for WindowData (the size windows are warped to), got ", transform.crop_size());
  CREMA_CHECK_PARAM(param.crop_mode() == "warp" || param.crop_mode() == "square",
                    "window_data_param.crop_mode", "must be \"warp\" or \"square\", got \"",
                    param.crop_mode(), "\"");
  CREMA_CHECK_PARAM(param.fg_fraction() >= 0 && param.fg_fraction() <= 1,
                    "window_data_param.fg_fraction", "must be in [0, 1], got ",
                    param.fg_fraction());
  CREMA_CHECK_PARAM(
      2 * static_cast<int64_t>(param.context_pad()) < static_cast<int64_t>(transform.crop_size()),
      "window_data_param.context_pad", "must be less than crop_size / 2 (", transform.crop_size(),
      " / 2), got ", param.context_pad());
  CREMA_CHECK_PARAM(!(transform.has_mean_file() && transform.mean_value_size() > 0),
                    "transform_param", "give mean_file or mean_value, not both");
  CREMA_CHECK_PARAM(transform.mean_value_size() <= 1 || transform.mean_value_size() == 3,
                    "transform_param.mean_value", "give one value or one per channel (3), got ",
                    transform.mean_value_size());
#ifndef CREMA_WITH_OPENCV
  throw ConfigError(ErrorPrefix() + "WindowData needs OpenCV, and this crema was built without it");
#endif
  batch_size_ = static_cast<int>(param.batch_size());
  crop_size_ = static_cast<int>(transform.crop_size());
  context_pad_ = static_cast<int>(param.context_pad());
  square_ = param.crop_mode() == "square";
  mirror_ = transform.mirror();
  cache_images_ = param.cache_images();
  fg_fraction_ = param.fg_fraction();
  scale_ = param.scale() * transform.scale();

  // Caffe's order of draws: its transformer's seed (unused here), then the sampling seed.
  if (mirror_ || phase_ == TRAIN) NextSeed();
  rng_.seed(NextSeed());

  ReadWindowFile();
  ReadMean();
  for (float v : transform.mean_value()) mean_values_.push_back(v);
  if (mean_values_.size() == 1) mean_values_.resize(channels_, mean_values_[0]);

  const int num_fg = static_cast<int>(static_cast<float>(batch_size_) * fg_fraction_);
  if (num_fg > 0 && fg_windows_.empty())
    throw RuntimeError(ErrorPrefix("window_data_param.source") +
                       StrCat("window file '", source_, "' has no foreground window (overlap >= ",
                              param.fg_threshold(), ") but a batch takes ", num_fg));
  if (batch_size_ - num_fg > 0 && bg_windows_.empty())
    throw RuntimeError(ErrorPrefix("window_data_param.source") +
                       StrCat("window file '", source_, "' has no background window (overlap < ",
                              param.bg_threshold(), ") but a batch takes ", batch_size_ - num_fg));
  top[0]->Reshape(std::vector<int>{batch_size_, channels_, crop_size_, crop_size_});
  top[1]->Reshape(std::vector<int>{batch_size_});
  LOG(INFO) << "WindowData layer \"" << name() << "\": " << images_.size() << " images, "
            << fg_windows_.size() << " foreground and " << bg_windows_.size()
            << " background windows; output " << top[0]->shape_string();
}

void WindowDataLayer::ReadWindowFile() {
  const WindowDataParameter& param = layer_param_.window_data_param();
  const std::string prefix = ErrorPrefix("window_data_param.source");
  std::ifstream in(source_);
  if (!in)
    throw RuntimeError(prefix + StrCat("cannot open window_data_param.source '", source_, "'"));
  std::map<int, int> label_hist{{0, 0}};
  std::vector<int> indices;  // as written after each '#'
  std::vector<Window> windows;
  std::string hashtag;
  int image_index = 0;
  if (!(in >> hashtag >> image_index))
    throw RuntimeError(prefix + StrCat("window file '", source_, "' is empty"));
  do {
    const std::string where =
        StrCat("window file '", source_, "', image record \"# ", image_index, "\"");
    if (hashtag != "#")
      throw RuntimeError(prefix + StrCat("window file '", source_,
                                         "': expected \"#\" before image ", "index ", image_index,
                                         ", got \"", hashtag, "\""));
    Image image;
    int num_windows = 0;
    if (!(in >> image.path >> image.channels >> image.height >> image.width >> num_windows) ||
        num_windows < 0)
      throw RuntimeError(prefix + where +
                         ": expected the image path, channels, height, width and the number of "
                         "windows");
    image.path = ListedPath(param.root_folder(), image.path, where);
    if (image.channels != 3)
      throw RuntimeError(prefix + where + ": channels is " + std::to_string(image.channels) +
                         ", but WindowData reads images as 3-channel BGR");
    struct stat st;
    if (stat(image.path.c_str(), &st) != 0)
      throw RuntimeError(
          prefix + StrCat("cannot read image '", image.path, "' (", where, "): no such file"));
    if (cache_images_) {
      std::ifstream file(image.path, std::ios::binary);
      std::ostringstream bytes;
      bytes << file.rdbuf();
      if (!file || bytes.str().empty())
        throw RuntimeError(prefix + StrCat("cannot read image '", image.path, "' (", where, ")"));
      image.encoded = bytes.str();
    }
    for (int i = 0; i < num_windows; ++i) {
      Window window;
      window.image = image_index;
      if (!(in >> window.label >> window.overlap >> window.x1 >> window.y1 >> window.x2 >>
            window.y2))
        throw RuntimeError(prefix + where + ": window " + std::to_string(i + 1) + " of " +
                           std::to_string(num_windows) +
                           " is not \"class_index overlap x1 y1 x2 y2\"");
      if (window.overlap >= param.fg_threshold()) {
        if (window.label <= 0)
          throw RuntimeError(prefix + where + ": foreground window " + std::to_string(i + 1) +
                             " has class_index " + std::to_string(window.label) +
                             " (must be > 0; 0 is background)");
        fg_windows_.push_back(window);
        ++label_hist[window.label];
      } else if (window.overlap < param.bg_threshold()) {
        window.label = 0;
        window.overlap = 0;
        bg_windows_.push_back(window);
        ++label_hist[0];
      }
    }
    images_.push_back(std::move(image));
  } while (in >> hashtag >> image_index);
  if (!in.eof())
    throw RuntimeError(prefix + StrCat("window file '", source_, "': unreadable text after image ",
                                       images_.size() - 1));
  // Caffe looks images up by the index written after '#', not by position.
  for (const auto* list : {&fg_windows_, &bg_windows_})
    for (const Window& window : *list)
      if (window.image < 0 || window.image >= static_cast<int>(images_.size()))
        throw RuntimeError(prefix + StrCat("window file '", source_, "': image index ",
                                           window.image, " is out of range (", images_.size(),
                                           " images, numbered from 0)"));
  for (const auto& [label, count] : label_hist)
    VLOG(1) << "WindowData \"" << name() << "\": class " << label << " has " << count << " windows";
}

void WindowDataLayer::ReadMean() {
  const TransformationParameter& transform = layer_param_.transform_param();
  if (!transform.has_mean_file()) return;
  const std::string& path = transform.mean_file();
  const std::string prefix = ErrorPrefix("transform_param.mean_file");
  std::ifstream in(path, std::ios::binary);
  BlobProto proto;
  if (!in)
    throw RuntimeError(prefix + StrCat("cannot read transform_param.mean_file '", path, "'"));
  if (!proto.ParseFromIstream(&in))
    throw RuntimeError(prefix + StrCat("transform_param.mean_file '", path,
                                       "' is not a BlobProto (.binaryproto)"));
  std::vector<int64_t> dims;
  if (proto.has_shape()) {
    for (int64_t d : proto.shape().dim()) dims.push_back(d);
  } else {
    dims = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  if (dims.size() == 4 && dims[0] == 1) dims.erase(dims.begin());
  if (dims.size() != 3 || dims[0] != channels_)
    throw ConfigError(prefix + StrCat("transform_param.mean_file '", path,
                                      "' must hold one 1 x 3 x H x W mean image"));
  mean_height_ = static_cast<int>(dims[1]);
  mean_width_ = static_cast<int>(dims[2]);
  // Caffe indexes the mean at the centred crop, with the column offset for rows too.
  const int mean_off = (mean_width_ - crop_size_) / 2;
  if (mean_width_ < crop_size_ || mean_off < 0 || mean_height_ < mean_off + crop_size_)
    throw ConfigError(prefix + StrCat("transform_param.mean_file '", path, "' is ", mean_height_,
                                      " x ", mean_width_, ", smaller than crop_size ", crop_size_));
  const int64_t count = dims[0] * dims[1] * dims[2];
  if (proto.data_size() == count) {
    mean_.assign(proto.data().begin(), proto.data().end());
  } else if (proto.double_data_size() == count) {
    mean_.assign(proto.double_data().begin(), proto.double_data().end());
  } else {
    throw RuntimeError(prefix + StrCat("transform_param.mean_file '", path, "' has ",
                                       std::max(proto.data_size(), proto.double_data_size()),
                                       " values for a shape of ", count));
  }
}

template <typename T>
void WindowDataLayer::Sample(const Window& window, bool mirror, int item, T* top_data) const {
#ifdef CREMA_WITH_OPENCV
  const Image& image = images_[window.image];
  cv::Mat img;
  const std::string what = ErrorPrefix() + StrCat("image '", image.path, "'");
  if (cache_images_)
    CheckEncodedImageSize(image.encoded, 3, what);
  else
    CheckImageFileSize(image.path, 3, what);
  try {
    if (cache_images_) {
      const cv::Mat raw(1, static_cast<int>(image.encoded.size()), CV_8UC1,
                        const_cast<char*>(image.encoded.data()));
      img = cv::imdecode(raw, cv::IMREAD_COLOR);
    } else {
      img = cv::imread(image.path, cv::IMREAD_COLOR);
    }
  } catch (const cv::Exception& e) {
    throw RuntimeError(ErrorPrefix() + StrCat("cannot decode image '", image.path,
                                              "': ", OneLineMessage(e.what())));
  }
  if (img.empty() || img.depth() != CV_8U)
    throw RuntimeError(ErrorPrefix() + StrCat("cannot read image '", image.path, "' (listed in '",
                                              source_,
                                              "'): missing or not a decodable 8-bit image"));
  const int crop = crop_size_;
  int x1 = window.x1, y1 = window.y1, x2 = window.x2, y2 = window.y2;
  int warp_width = crop, warp_height = crop, pad_w = 0, pad_h = 0;
  if (context_pad_ > 0 || square_) {
    // Grow the box so that, once warped to crop x crop, context_pad pixels of context surround
    // it; the arithmetic is Caffe's, in the net's type.
    const T context_scale = static_cast<T>(crop) / static_cast<T>(crop - 2 * context_pad_);
    T half_height = static_cast<T>(static_cast<T>(y2 - y1 + 1) / 2.0);
    T half_width = static_cast<T>(static_cast<T>(x2 - x1 + 1) / 2.0);
    const T center_x = static_cast<T>(x1) + half_width;
    const T center_y = static_cast<T>(y1) + half_height;
    if (square_) half_height = half_width = std::max(half_height, half_width);
    x1 = static_cast<int>(std::round(center_x - half_width * context_scale));
    x2 = static_cast<int>(std::round(center_x + half_width * context_scale));
    y1 = static_cast<int>(std::round(center_y - half_height * context_scale));
    y2 = static_cast<int>(std::round(center_y + half_height * context_scale));
    // Clip to the image, remembering how much was cut on each side.
    const int unclipped_height = y2 - y1 + 1;
    const int unclipped_width = x2 - x1 + 1;
    int pad_x1 = std::max(0, -x1);
    int pad_y1 = std::max(0, -y1);
    int pad_x2 = std::max(0, x2 - img.cols + 1);
    int pad_y2 = std::max(0, y2 - img.rows + 1);
    x1 += pad_x1;
    x2 -= pad_x2;
    y1 += pad_y1;
    y2 -= pad_y2;
    const T scale_x = static_cast<T>(crop) / static_cast<T>(unclipped_width);
    const T scale_y = static_cast<T>(crop) / static_cast<T>(unclipped_height);
    warp_width = static_cast<int>(std::round(static_cast<T>(x2 - x1 + 1) * scale_x));
    warp_height = static_cast<int>(std::round(static_cast<T>(y2 - y1 + 1) * scale_y));
    pad_x1 = static_cast<int>(std::round(static_cast<T>(pad_x1) * scale_x));
    pad_x2 = static_cast<int>(std::round(static_cast<T>(pad_x2) * scale_x));
    pad_y1 = static_cast<int>(std::round(static_cast<T>(pad_y1) * scale_y));
    pad_y2 = static_cast<int>(std::round(static_cast<T>(pad_y2) * scale_y));
    pad_h = pad_y1;
    pad_w = mirror ? pad_x2 : pad_x1;  // the padding is mirrored too
    // Rounding may make the warped region overflow the crop.
    warp_height = std::min(warp_height, crop - pad_h);
    warp_width = std::min(warp_width, crop - pad_w);
  }
  if (x1 < 0 || y1 < 0 || x2 >= img.cols || y2 >= img.rows || x2 < x1 || y2 < y1)
    throw RuntimeError(ErrorPrefix() + StrCat("window (", window.x1, ", ", window.y1, ", ",
                                              window.x2, ", ", window.y2, ") lies outside image '",
                                              image.path, "' (", img.cols, " x ", img.rows,
                                              ", listed in '", source_, "')"));
  if (warp_width <= 0 || warp_height <= 0) return;  // nothing of the window is inside the crop
  cv::Mat warped;
  cv::resize(img(cv::Rect(x1, y1, x2 - x1 + 1, y2 - y1 + 1)), warped,
             cv::Size(warp_width, warp_height), 0, 0, cv::INTER_LINEAR);
  if (mirror) cv::flip(warped, warped, 1);

  const T scale = static_cast<T>(scale_);
  const int mean_off = mean_.empty() ? 0 : (mean_width_ - crop) / 2;
  for (int h = 0; h < warped.rows; ++h) {
    const uint8_t* row = warped.ptr<uint8_t>(h);
    for (int w = 0; w < warped.cols; ++w) {
      for (int c = 0; c < channels_; ++c) {
        const T pixel = static_cast<T>(row[w * channels_ + c]);
        T mean = 0;
        if (!mean_.empty()) {
          mean = static_cast<T>(
              mean_[(static_cast<size_t>(c) * mean_height_ + h + mean_off + pad_h) * mean_width_ +
                    w + mean_off + pad_w]);
        } else if (!mean_values_.empty()) {
          mean = static_cast<T>(mean_values_[c]);
        }
        top_data[((static_cast<size_t>(item) * channels_ + c) * crop + h + pad_h) * crop + w +
                 pad_w] = (pixel - mean) * scale;
      }
    }
  }
#else
  (void)window, (void)mirror, (void)item, (void)top_data;
  throw RuntimeError(ErrorPrefix() + "WindowData needs OpenCV");
#endif
}

void WindowDataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  top[0]->Reshape(std::vector<int>{batch_size_, channels_, crop_size_, crop_size_});
  top[1]->Reshape(std::vector<int>{batch_size_});
  const int num_fg = static_cast<int>(static_cast<float>(batch_size_) * fg_fraction_);
  CREMA_DISPATCH_FLOAT(dtype_, T, {
    T* top_data = top[0]->mutable_cpu_data<T>();
    T* top_label = top[1]->mutable_cpu_data<T>();
    std::fill(top_data, top_data + top[0]->count(), T(0));
    // Background windows first, then foreground, as Caffe.
    int item = 0;
    for (int is_fg = 0; is_fg < 2; ++is_fg) {
      const std::vector<Window>& windows = is_fg ? fg_windows_ : bg_windows_;
      const int count = is_fg ? num_fg : batch_size_ - num_fg;
      for (int k = 0; k < count; ++k, ++item) {
        const Window& window = windows[rng_() % windows.size()];
        const bool mirror = mirror_ && rng_() % 2 != 0;
        Sample(window, mirror, item, top_data);
        top_label[item] = static_cast<T>(window.label);
      }
    }
  });
}

CREMA_REGISTER_LAYER(WindowData, WindowDataLayer);

}  // namespace crema
