#include "layers/image_data/image_data_layer.hpp"

#include <glog/logging.h>

#include <cstdlib>
#include <fstream>
#include <limits>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "io/input_checks.hpp"

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

ImageDataLayer::~ImageDataLayer() {
  if (skipped_ > 0)
    LOG(WARNING) << prefix_ << "skipped " << skipped_ << " bad images of '" << source_
                 << "' in all";
}

void ImageDataLayer::ShuffleLines() {
  for (int64_t i = static_cast<int64_t>(lines_.size()) - 1; i > 0; --i) {
    const uint32_t j = BoostUniform(&shuffle_rng_, static_cast<uint32_t>(i));
    std::swap(lines_[i], lines_[j]);
    std::swap(order_[i], order_[j]);
  }
}

bool ImageDataLayer::SaveDataState(DataLayerState* state) const {
  state->Clear();
  state->set_layer(name());
  state->set_type(type());
  state->set_position(line_id_);
  state->set_skipped(skipped_);
  state->set_consecutive_bad(consecutive_bad_);
  if (shuffle_) {
    state->mutable_order()->Assign(order_.begin(), order_.end());
    state->set_shuffle_rng(EngineState(shuffle_rng_));
  }
  if (transformer_->NeedsRandom()) state->set_transform_rng(transformer_->RandState());
  return true;
}

void ImageDataLayer::RestoreDataState(const DataLayerState& state) {
  const int64_t size = static_cast<int64_t>(lines_.size());
  const std::string changed =
      StrCat("cannot resume reading '", source_, "': the list has changed since the snapshot");
  if (state.position() < 0 || state.position() >= size) throw RuntimeError(prefix_ + changed);
  if (shuffle_) {
    if (state.order_size() != size) throw RuntimeError(prefix_ + changed);
    std::vector<bool> seen(lines_.size(), false);
    for (const int64_t index : state.order()) {
      if (index < 0 || index >= size || seen[index]) throw RuntimeError(prefix_ + changed);
      seen[index] = true;
    }
    std::vector<std::pair<std::string, int>> as_read(lines_.size());
    for (int64_t i = 0; i < size; ++i) as_read[order_[i]] = std::move(lines_[i]);
    for (int64_t i = 0; i < size; ++i) {
      order_[i] = state.order(static_cast<int>(i));
      lines_[i] = std::move(as_read[order_[i]]);
    }
    SetEngineState(state.shuffle_rng(), &shuffle_rng_);
  }
  if (transformer_->NeedsRandom()) transformer_->SetRandState(state.transform_rng());
  line_id_ = static_cast<int>(state.position());
  skipped_ = state.skipped();
  consecutive_bad_ = state.consecutive_bad();
}

void ImageDataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ImageDataParameter& param = layer_param_.image_data_param();
  source_ = param.source();
  root_folder_ = param.root_folder();
  prefix_ = ErrorPrefix();
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
  CREMA_CHECK_PARAM(param.decode_threads() <= 1024, "image_data_param.decode_threads",
                    "must be in [0, 1024] (0: auto), got ", param.decode_threads());
#ifndef CREMA_WITH_OPENCV
  throw ConfigError(ErrorPrefix() + "ImageData needs OpenCV, and this crema was built without it");
#endif
  batch_size_ = static_cast<int>(param.batch_size());
  new_height_ = static_cast<int>(param.new_height());
  new_width_ = static_cast<int>(param.new_width());
  is_color_ = param.is_color();
  shuffle_ = param.shuffle();
  skip_bad_ = param.on_bad_record() == DataParameter::SKIP;
  CREMA_CHECK_PARAM(param.num_shards() > 0, "image_data_param.num_shards", "must be > 0, got ",
                    param.num_shards());
  CREMA_CHECK_PARAM(param.shard_id() < param.num_shards(), "image_data_param.shard_id",
                    "must be < num_shards (", param.num_shards(), "), got ", param.shard_id());

  std::ifstream list(source_);
  if (!list)
    throw RuntimeError(ErrorPrefix("image_data_param.source") +
                       StrCat("cannot open image_data_param.source '", source_, "'"));
  lines_.clear();
  std::string line;
  int64_t listed = 0;  // image lines so far, for the shard
  for (int number = 1; std::getline(list, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string path;
    int label = 0;
    if (!SplitPathLabel(line, &path, &label))
      throw RuntimeError(ErrorPrefix("image_data_param.source") +
                         StrCat(source_, ":", number,
                                ": expected \"path label\" (an integer label after the last "
                                "space), got '",
                                line, "'"));
    ListedPath(root_folder_, path, StrCat(source_, ":", number));
    if (listed++ % param.num_shards() != param.shard_id()) continue;
    lines_.emplace_back(path, label);
  }
  if (lines_.empty())
    throw RuntimeError(
        ErrorPrefix("image_data_param.source") +
        StrCat("image_data_param.source '", source_, "' lists ",
               listed == 0 ? "no images"
                           : StrCat(listed, " images, none of them in shard_id ", param.shard_id(),
                                    " of num_shards ", param.num_shards())));
  order_.resize(lines_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);

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
  LOG(INFO) << "ImageData layer \"" << name() << "\": " << lines_.size() << " images in " << source_
            << (param.num_shards() > 1
                    ? StrCat(" (shard ", param.shard_id(), " of ", param.num_shards(), ")")
                    : "");
  line_id_ = 0;
  if (param.rand_skip() > 0) {
    const uint32_t skip = static_cast<uint32_t>(ThreadRng()()) % param.rand_skip();
    CREMA_CHECK_PARAM(skip < lines_.size(), "image_data_param.rand_skip", "drew ", skip, " but '",
                      source_, "' lists only ", lines_.size(), " images");
    LOG(INFO) << "ImageData layer \"" << name() << "\" skips the first " << skip << " images";
    line_id_ = static_cast<int>(skip);
  }

  // The first good image gives the shape (and its problems are reported here); bad images
  // before it are skipped for good (with SKIP).
  Item item;
  for (;;) {
    Describe(&item);
    try {
      ReadImage(&item);
      break;  // the first batch starts with this image
    } catch (const RuntimeError&) {
      OnBadImage(std::current_exception());
      NextLine();
    }
  }
  consecutive_bad_ = 0;
  std::vector<int> shape;
  try {
    shape = transformer_->ShapeOf(item.image, item.path);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  }
  shape[0] = batch_size_;
  top[0]->Reshape(shape);
  top[1]->Reshape(std::vector<int>{batch_size_});
  const int threads = DecodeThreads(param.decode_threads());
  LOG(INFO) << "ImageData layer \"" << name() << "\": output " << top[0]->shape_string() << ", "
            << threads << " decode threads";
  items_.resize(static_cast<size_t>(batch_size_));
  workers_ = std::make_unique<WorkerPool>(threads);
}

void ImageDataLayer::Describe(Item* item) const {
  item->path = root_folder_ + lines_[line_id_].first;
  item->label = lines_[line_id_].second;
  item->line = line_id_ + 1;
}

void ImageDataLayer::NextLine() {
  if (++line_id_ >= static_cast<int>(lines_.size())) {
    line_id_ = 0;
    if (shuffle_) ShuffleLines();
  }
}

void ImageDataLayer::ReadImage(Item* item) const {
  const std::string& path = item->path;
#ifdef CREMA_WITH_OPENCV
  cv::Mat image;
  CheckImageFileSize(path, is_color_ ? 3 : 1, prefix_ + StrCat("image '", path, "'"));
  try {
    image = cv::imread(path, is_color_ ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  } catch (const cv::Exception& e) {
    throw RuntimeError(prefix_ +
                       StrCat("cannot decode image '", path, "': ", OneLineMessage(e.what())));
  }
  if (image.empty() || image.depth() != CV_8U)
    throw RuntimeError(prefix_ + StrCat("cannot read image '", path, "' (line ", item->line,
                                        " of the list as read, from '", source_,
                                        "'): missing or not a decodable 8-bit image"));
  if (new_height_ > 0) {
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(new_width_, new_height_));
    image = resized;
  }
  // Kept interleaved (H x W x C, BGR); the transformer reads it as Caffe's CVMatToDatum planes.
  if (!image.isContinuous()) image = image.clone();
  item->pixels.assign(image.data, image.data + image.total() * image.elemSize());
  item->image = DataTransformer::Image();
  item->image.channels = image.channels();
  item->image.height = image.rows;
  item->image.width = image.cols;
  item->image.bytes = item->pixels.data();
  item->image.interleaved = true;
#else
  throw RuntimeError(prefix_ + StrCat("cannot read image '", path, "': built without OpenCV"));
#endif
}

void ImageDataLayer::OnBadImage(const std::exception_ptr& error) {
  if (!skip_bad_) std::rethrow_exception(error);
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = e.what();
  }
  ++skipped_;
  if (skipped_ <= 10)
    LOG(WARNING) << "skipping (on_bad_record: SKIP): " << message
                 << (skipped_ == 10 ? "; further ones are only counted" : "");
  if (++consecutive_bad_ >= static_cast<int64_t>(lines_.size()))
    throw RuntimeError(prefix_ + StrCat("no image of '", source_,
                                        "' can be read (on_bad_record: SKIP skipped ", skipped_,
                                        "); the last: ", message));
}

void ImageDataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  const std::vector<int> order = GatherInOrder(
      workers_.get(), batch_size_,
      [this](int slot) {
        Describe(&items_[slot]);
        NextLine();
      },
      [this](int slot) { ReadImage(&items_[slot]); },
      [this](int, const std::exception_ptr& error) {
        if (error)
          OnBadImage(error);
        else
          consecutive_bad_ = 0;
      });
  std::vector<const DataTransformer::Image*> images;
  for (int slot : order) images.push_back(&items_[slot].image);
  try {
    transformer_->TransformBatch(
        images, [&](int k) { return items_[order[k]].path; }, workers_.get(), top[0]);
  } catch (const RuntimeError& e) {
    throw RuntimeError(prefix_ + e.what());
  }
  top[1]->Reshape(std::vector<int>{batch_size_});
  CREMA_DISPATCH_FLOAT(dtype_, T, {
    T* labels = top[1]->mutable_cpu_data<T>();
    for (int k = 0; k < batch_size_; ++k) labels[k] = static_cast<T>(items_[order[k]].label);
  });
}

CREMA_REGISTER_LAYER(ImageData, ImageDataLayer);

}  // namespace crema
