#include "layers/image_data/image_data_layer.hpp"

#include <glog/logging.h>

#include <cstdlib>
#include <fstream>
#include <limits>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace crema {
namespace {

// boost::uniform_int<>(0, range) drawn from a 32-bit engine, as Caffe's shuffle uses it.
uint32_t BoostUniform(std::mt19937* engine, uint32_t range) {
  constexpr uint32_t brange = std::numeric_limits<uint32_t>::max();
  if (range == brange) return (*engine)();
  uint32_t bucket_size = brange / (range + 1);
  if (brange % (range + 1) == range) ++bucket_size;
  for (;;) {
    const uint32_t result = static_cast<uint32_t>((*engine)()) / bucket_size;
    if (result <= range) return result;
  }
}

}  // namespace

ImageDataLayer::~ImageDataLayer() = default;

void ImageDataLayer::ShuffleLines() {
  for (int64_t i = static_cast<int64_t>(lines_.size()) - 1; i > 0; --i)
    std::swap(lines_[i], lines_[BoostUniform(&shuffle_rng_, static_cast<uint32_t>(i))]);
}

void ImageDataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ImageDataParameter& param = layer_param_.image_data_param();
  source_ = param.source();
  root_folder_ = param.root_folder();
  CREMA_CHECK_PARAM(!source_.empty(), "image_data_param.source",
                    "is required (a list of \"path label\" lines)");
  CREMA_CHECK_PARAM(param.batch_size() > 0 && param.batch_size() <= INT32_MAX,
                    "image_data_param.batch_size", "must be > 0, got ", param.batch_size());
  CREMA_CHECK_PARAM((param.new_height() == 0) == (param.new_width() == 0),
                    "image_data_param.new_height",
                    "and new_width must be set together, got new_height: ", param.new_height(),
                    " new_width: ", param.new_width());
  CREMA_CHECK_PARAM(param.new_height() <= INT32_MAX && param.new_width() <= INT32_MAX,
                    "image_data_param.new_height", "and new_width must be < 2^31");
#ifndef CREMA_WITH_OPENCV
  throw ConfigError(ErrorPrefix() + "ImageData needs OpenCV, and this crema was built without it");
#endif
  batch_size_ = static_cast<int>(param.batch_size());
  new_height_ = static_cast<int>(param.new_height());
  new_width_ = static_cast<int>(param.new_width());
  is_color_ = param.is_color();
  shuffle_ = param.shuffle();

  std::ifstream list(source_);
  if (!list)
    throw RuntimeError(ErrorPrefix("image_data_param.source") +
                       StrCat("cannot open image_data_param.source '", source_, "'"));
  lines_.clear();
  std::string line;
  for (int number = 1; std::getline(list, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const size_t pos = line.find_last_of(' ');
    if (pos == std::string::npos || pos + 1 == line.size())
      throw RuntimeError(
          ErrorPrefix("image_data_param.source") +
          StrCat("line ", number, " of '", source_, "' is not \"path label\": '", line, "'"));
    lines_.emplace_back(line.substr(0, pos), std::atoi(line.c_str() + pos + 1));
  }
  if (lines_.empty())
    throw RuntimeError(ErrorPrefix("image_data_param.source") +
                       StrCat("image_data_param.source '", source_, "' lists no images"));

  try {
    transformer_ = std::make_unique<DataTransformer>(layer_param_.transform_param(), phase_);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("transform_param") + e.what());
  }
  // Caffe's order of draws: the transformer's seed, the shuffle seed, the skip.
  if (transformer_->NeedsRandom()) transformer_->InitRand(NextSeed());
  if (shuffle_) {
    shuffle_rng_.seed(NextSeed());
    ShuffleLines();
  }
  LOG(INFO) << "ImageData layer \"" << name() << "\": " << lines_.size() << " images in "
            << source_;
  line_id_ = 0;
  if (param.rand_skip() > 0) {
    const uint32_t skip = static_cast<uint32_t>(ThreadRng()()) % param.rand_skip();
    CREMA_CHECK_PARAM(skip < lines_.size(), "image_data_param.rand_skip", "drew ", skip, " but '",
                      source_, "' lists only ", lines_.size(), " images");
    LOG(INFO) << "ImageData layer \"" << name() << "\" skips the first " << skip << " images";
    line_id_ = static_cast<int>(skip);
  }

  // The first image gives the shape (and its problems are reported here).
  Datum datum;
  ReadImage(line_id_, &datum);
  std::vector<int> shape;
  try {
    shape = transformer_->InferBlobShape(datum, root_folder_ + lines_[line_id_].first);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  }
  shape[0] = batch_size_;
  top[0]->Reshape(shape);
  top[1]->Reshape(std::vector<int>{batch_size_});
  LOG(INFO) << "ImageData layer \"" << name() << "\": output " << top[0]->shape_string();
}

void ImageDataLayer::ReadImage(int index, Datum* datum) const {
  const std::string path = root_folder_ + lines_[index].first;
#ifdef CREMA_WITH_OPENCV
  cv::Mat image;
  try {
    image = cv::imread(path, is_color_ ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  } catch (const cv::Exception& e) {
    throw RuntimeError(ErrorPrefix() + StrCat("cannot decode image '", path, "': ", e.what()));
  }
  if (image.empty() || image.depth() != CV_8U)
    throw RuntimeError(ErrorPrefix() + StrCat("cannot read image '", path, "' (line ", index + 1,
                                              " of the list as read, from '", source_,
                                              "'): missing or not a decodable 8-bit image"));
  if (new_height_ > 0) {
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(new_width_, new_height_));
    image = resized;
  }
  // Caffe's CVMatToDatum: HWC interleaved -> CHW planes.
  const int channels = image.channels(), height = image.rows, width = image.cols;
  std::string bytes(static_cast<size_t>(channels) * height * width, '\0');
  for (int h = 0; h < height; ++h) {
    const uint8_t* row = image.ptr<uint8_t>(h);
    for (int w = 0; w < width; ++w)
      for (int c = 0; c < channels; ++c)
        bytes[(static_cast<size_t>(c) * height + h) * width + w] =
            static_cast<char>(row[w * channels + c]);
  }
  datum->Clear();
  datum->set_channels(channels);
  datum->set_height(height);
  datum->set_width(width);
  datum->set_data(std::move(bytes));
  datum->set_label(lines_[index].second);
#else
  (void)datum;
  throw RuntimeError(ErrorPrefix() +
                     StrCat("cannot read image '", path, "': built without OpenCV"));
#endif
}

void ImageDataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  top[1]->Reshape(std::vector<int>{batch_size_});
  Datum datum;
  for (int item = 0; item < batch_size_; ++item) {
    ReadImage(line_id_, &datum);
    const std::string what = root_folder_ + lines_[line_id_].first;
    if (item == 0) {  // Caffe shapes each batch from its first image
      std::vector<int> shape = transformer_->InferBlobShape(datum, what);
      shape[0] = batch_size_;
      top[0]->Reshape(shape);
    }
    transformer_->Transform(datum, top[0], item, what);
    CREMA_DISPATCH_FLOAT(dtype_, T,
                         top[1]->mutable_cpu_data<T>()[item] = static_cast<T>(datum.label()));
    if (++line_id_ >= static_cast<int>(lines_.size())) {
      line_id_ = 0;
      if (shuffle_) ShuffleLines();
    }
  }
}

CREMA_REGISTER_LAYER(ImageData, ImageDataLayer);

}  // namespace crema
