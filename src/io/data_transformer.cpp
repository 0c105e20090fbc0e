#include "io/data_transformer.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "io/input_checks.hpp"

namespace crema {
namespace {

std::string Named(const std::string& what) { return what.empty() ? "record" : what; }

std::string ShapeText(int c, int h, int w) { return StrCat(c, " x ", h, " x ", w); }

// out[w] = value(w), or out[width - 1 - w] when mirrored; separate loops so each vectorizes.
template <typename T, typename Value>
inline void WriteRow(T* out, int width, bool mirror, const Value& value) {
  if (mirror) {
    for (int w = 0; w < width; ++w) out[width - 1 - w] = value(w);
  } else {
    for (int w = 0; w < width; ++w) out[w] = value(w);
  }
}

// One output row: (pixel - mean) * scale, the mean from the mean file's row, or one value.
template <typename T, typename Src>
void TransformRow(const Src* src, int pixel_step, const double* mean_row, bool has_mean_value,
                  T mean_value, T scale, bool mirror, int width, T* out) {
  if (mean_row != nullptr) {
    WriteRow(out, width, mirror, [&](int w) {
      return (static_cast<T>(src[w * pixel_step]) - static_cast<T>(mean_row[w])) * scale;
    });
  } else if (has_mean_value) {
    WriteRow(out, width, mirror,
             [&](int w) { return (static_cast<T>(src[w * pixel_step]) - mean_value) * scale; });
  } else {
    WriteRow(out, width, mirror,
             [&](int w) { return static_cast<T>(src[w * pixel_step]) * scale; });
  }
}

}  // namespace

void ParseDatum(const std::string& bytes, Datum* datum, const std::string& what) {
  if (!datum->ParseFromString(bytes))
    CREMA_THROW_RUNTIME(Named(what), ": not a valid Datum (", bytes.size(),
                        " bytes; the DB is corrupt or holds something else)");
}

void InterleavedToDatum(const uint8_t* pixels, size_t row_bytes, int channels, int rows, int cols,
                        Datum* datum) {
  std::string planes(static_cast<size_t>(channels) * rows * cols, '\0');
  for (int h = 0; h < rows; ++h) {
    const uint8_t* row = pixels + static_cast<size_t>(h) * row_bytes;
    for (int w = 0; w < cols; ++w)
      for (int c = 0; c < channels; ++c)
        planes[(static_cast<size_t>(c) * rows + h) * cols + w] =
            static_cast<char>(row[static_cast<size_t>(w) * channels + c]);
  }
  datum->set_channels(channels);
  datum->set_height(rows);
  datum->set_width(cols);
  datum->clear_float_data();
  datum->set_encoded(false);
  datum->set_data(std::move(planes));
}

std::string EncodeImage(const uint8_t* planes, int channels, int height, int width,
                        const std::string& extension, int jpeg_quality) {
#ifdef CREMA_WITH_OPENCV
  CREMA_ASSERT(channels == 1 || channels == 3, channels, " channels");
  cv::Mat image(height, width, channels == 3 ? CV_8UC3 : CV_8UC1);
  for (int h = 0; h < height; ++h) {
    uint8_t* row = image.ptr<uint8_t>(h);
    for (int w = 0; w < width; ++w)
      for (int c = 0; c < channels; ++c)
        row[w * channels + c] = planes[(static_cast<size_t>(c) * height + h) * width + w];
  }
  std::vector<uchar> buffer;
  bool ok = false;
  try {
    ok = cv::imencode(extension, image, buffer, {cv::IMWRITE_JPEG_QUALITY, jpeg_quality});
  } catch (const cv::Exception& e) {
    CREMA_THROW_RUNTIME("cannot encode an image as '", extension, "': ", OneLineMessage(e.what()));
  }
  if (!ok) CREMA_THROW_RUNTIME("cannot encode an image as '", extension, "'");
  return std::string(buffer.begin(), buffer.end());
#else
  (void)planes, (void)channels, (void)height, (void)width, (void)jpeg_quality;
  CREMA_THROW_RUNTIME("cannot encode an image as '", extension,
                      "': this crema was built without OpenCV");
#endif
}

DataTransformer::DataTransformer(const TransformationParameter& param, Phase phase)
    : param_(param), phase_(phase) {
  if (param_.has_mean_file() && param_.mean_value_size() > 0)
    CREMA_THROW_CONFIG("transform_param: give mean_file or mean_value, not both");
  if (param_.force_color() && param_.force_gray())
    CREMA_THROW_CONFIG("transform_param: force_color and force_gray can't both be set");
  for (float v : param_.mean_value()) mean_values_.push_back(v);
  if (!param_.has_mean_file()) return;

  const std::string& path = param_.mean_file();
  std::ifstream in(path, std::ios::binary);
  if (!in) CREMA_THROW_RUNTIME("cannot read transform_param.mean_file '", path, "'");
  std::ostringstream contents;
  contents << in.rdbuf();
  BlobProto proto;
  if (!proto.ParseFromString(contents.str()))
    CREMA_THROW_RUNTIME("transform_param.mean_file '", path, "' is not a BlobProto (.binaryproto)");
  std::vector<int64_t> dims;
  if (proto.has_shape()) {
    for (int64_t d : proto.shape().dim()) dims.push_back(d);
  } else {
    dims = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  if (dims.size() == 4 && dims[0] == 1) dims.erase(dims.begin());
  if (dims.size() != 3)
    CREMA_THROW_CONFIG("transform_param.mean_file '", path,
                       "' must hold one 1 x C x H x W mean image, got ", dims.size(), " axes");
  const int64_t count = CheckedElementCount(dims);
  if (count <= 0 || dims[0] > INT32_MAX || dims[1] > INT32_MAX || dims[2] > INT32_MAX)
    CREMA_THROW_RUNTIME("transform_param.mean_file '", path, "' declares a mean image of ", dims[0],
                        " x ", dims[1], " x ", dims[2], " values");
  mean_channels_ = static_cast<int>(dims[0]);
  mean_height_ = static_cast<int>(dims[1]);
  mean_width_ = static_cast<int>(dims[2]);
  if (proto.data_size() == count) {
    mean_.assign(proto.data().begin(), proto.data().end());
  } else if (proto.double_data_size() == count) {
    mean_.assign(proto.double_data().begin(), proto.double_data().end());
  } else {
    CREMA_THROW_RUNTIME("transform_param.mean_file '", path, "' has ",
                        std::max(proto.data_size(), proto.double_data_size()),
                        " values for a shape of ", count);
  }
}

bool DataTransformer::NeedsRandom() const {
  return param_.mirror() || (phase_ == TRAIN && param_.crop_size() > 0);
}

DataTransformer::Image DataTransformer::Decode(const Datum& datum, std::vector<uint8_t>* pixels,
                                               const std::string& what) const {
  Image image;
  if (datum.encoded()) {
#ifdef CREMA_WITH_OPENCV
    const std::string& data = datum.data();
    if (data.empty()) CREMA_THROW_RUNTIME(Named(what), ": the encoded image is empty (0 bytes)");
    CheckEncodedImageSize(data, param_.force_gray() ? 1 : 3, Named(what));
    cv::Mat raw(1, static_cast<int>(data.size()), CV_8UC1, const_cast<char*>(data.data()));
    const int flag = param_.force_color()  ? cv::IMREAD_COLOR
                     : param_.force_gray() ? cv::IMREAD_GRAYSCALE
                                           : cv::IMREAD_ANYCOLOR;
    cv::Mat img;
    try {
      img = cv::imdecode(raw, flag);
    } catch (const cv::Exception& e) {
      CREMA_THROW_RUNTIME(Named(what),
                          ": cannot decode the encoded image: ", OneLineMessage(e.what()));
    }
    if (img.empty() || img.depth() != CV_8U)
      CREMA_THROW_RUNTIME(Named(what), ": cannot decode the encoded image (", data.size(),
                          " bytes; not a JPEG/PNG OpenCV can read, or corrupt)");
    image.channels = img.channels();
    image.height = img.rows;
    image.width = img.cols;
    // Kept in OpenCV's interleaved H x W x C (BGR) layout; Transform reads it as Caffe's
    // Transform(cv::Mat) does.
    if (!img.isContinuous()) img = img.clone();
    pixels->assign(img.data, img.data + img.total() * img.elemSize());
    image.bytes = pixels->data();
    image.interleaved = true;
    return image;
#else
    (void)pixels;
    CREMA_THROW_RUNTIME(Named(what),
                        " holds an encoded (JPEG/PNG) image; this crema was built without "
                        "OpenCV, so it can only read raw pixels");
#endif
  }
  image.channels = datum.channels();
  image.height = datum.height();
  image.width = datum.width();
  if (image.channels <= 0 || image.height <= 0 || image.width <= 0)
    CREMA_THROW_RUNTIME(Named(what), ": the Datum has no image (channels x height x width = ",
                        ShapeText(image.channels, image.height, image.width), ")");
  const int64_t count = CheckedElementCount({image.channels, image.height, image.width});
  if (count < 0)
    CREMA_THROW_RUNTIME(Named(what), ": the Datum's shape ",
                        ShapeText(image.channels, image.height, image.width),
                        " has more values than int64 can count");
  if (!datum.data().empty()) {
    if (static_cast<int64_t>(datum.data().size()) != count)
      CREMA_THROW_RUNTIME(Named(what), ": the Datum holds ", datum.data().size(),
                          " bytes of pixels for a shape of ",
                          ShapeText(image.channels, image.height, image.width), " = ", count,
                          " (truncated or corrupt)");
    image.bytes = reinterpret_cast<const uint8_t*>(datum.data().data());
  } else {
    if (datum.float_data_size() != count)
      CREMA_THROW_RUNTIME(Named(what), ": the Datum holds ", datum.float_data_size(),
                          " float values for a shape of ",
                          ShapeText(image.channels, image.height, image.width), " = ", count,
                          " (truncated or corrupt)");
    image.floats = datum.float_data().data();
  }
  return image;
}

void DataTransformer::CheckFits(const Image& image, const std::string& what) const {
  const int crop = static_cast<int>(param_.crop_size());
  if (crop > image.height || crop > image.width)
    CREMA_THROW_CONFIG("transform_param.crop_size ", crop, " is larger than the image (",
                       image.height, " x ", image.width, ", ", Named(what), ")");
  if (!mean_.empty() && (mean_channels_ != image.channels || mean_height_ != image.height ||
                         mean_width_ != image.width))
    CREMA_THROW_CONFIG("transform_param.mean_file '", param_.mean_file(), "' is ",
                       ShapeText(mean_channels_, mean_height_, mean_width_), " but the images are ",
                       ShapeText(image.channels, image.height, image.width));
  if (mean_values_.size() > 1 && static_cast<int>(mean_values_.size()) != image.channels)
    CREMA_THROW_CONFIG("transform_param.mean_value: give one value or one per channel (",
                       image.channels, "), got ", mean_values_.size());
}

std::vector<int> DataTransformer::ShapeOf(const Image& image, const std::string& what) const {
  CheckFits(image, what);
  const int crop = static_cast<int>(param_.crop_size());
  return {1, image.channels, crop > 0 ? crop : image.height, crop > 0 ? crop : image.width};
}

std::vector<int> DataTransformer::InferBlobShape(const Datum& datum, const std::string& what) {
  return ShapeOf(Decode(datum, &decoded_, what), what);
}

std::string DataTransformer::RandState() const { return EngineState(rng_); }

void DataTransformer::SetRandState(const std::string& state) { SetEngineState(state, &rng_); }

DataTransformer::Draws DataTransformer::NextDraws() {
  // As many words as Transform uses, in Caffe's order: mirror, then the offsets.
  Draws draws;
  int count = 0;
  if (param_.mirror()) draws.words[count++] = rng_();
  if (phase_ == TRAIN && param_.crop_size() > 0) {
    draws.words[count++] = rng_();
    draws.words[count++] = rng_();
  }
  return draws;
}

template <typename T>
void DataTransformer::Transform(const Datum& datum, T* out, const std::string& what) {
  const Image image = Decode(datum, &decoded_, what);
  CheckFits(image, what);
  Transform(image, NextDraws(), out);
}

DataTransformer::Window DataTransformer::Choose(int height, int width, const Draws& draws) const {
  const int crop = static_cast<int>(param_.crop_size());
  // Each choice is Caffe's Rand(n) = word % n, the words taken in NextDraws' order.
  int next = 0;
  const auto rand = [&](int n) {
    return static_cast<int>(draws.words[next++] % static_cast<uint32_t>(n));
  };
  Window window;
  window.mirror = param_.mirror() && rand(2) != 0;
  window.height = height;
  window.width = width;
  if (crop > 0) {
    window.height = window.width = crop;
    if (phase_ == TRAIN) {
      window.h_off = rand(height - crop + 1);
      window.w_off = rand(width - crop + 1);
    } else {
      window.h_off = (height - crop) / 2;
      window.w_off = (width - crop) / 2;
    }
  }
  return window;
}

template <typename T>
void DataTransformer::Transform(const Image& image, const Draws& draws, T* out) const {
  const int channels = image.channels;
  const int image_height = image.height;
  const int image_width = image.width;
  const T scale = static_cast<T>(param_.scale());
  const Window window = Choose(image_height, image_width, draws);
  const bool do_mirror = window.mirror;
  const int height = window.height, width = window.width;
  const int h_off = window.h_off, w_off = window.w_off;
  const bool has_mean_file = !mean_.empty();
  const bool has_mean_values = !mean_values_.empty();
  // Element (c, y, x) of the image, planar C x H x W or interleaved H x W x C; the mean file is
  // planar, indexed at the uncropped position.
  const int64_t channel_step =
      image.interleaved ? 1 : static_cast<int64_t>(image_height) * image_width;
  const int64_t row_step =
      image.interleaved ? static_cast<int64_t>(image_width) * channels : image_width;
  const int pixel_step = image.interleaved ? channels : 1;
  for (int c = 0; c < channels; ++c) {
    const T mean_value =
        has_mean_values ? static_cast<T>(mean_values_[mean_values_.size() == 1 ? 0 : c]) : T(0);
    for (int h = 0; h < height; ++h) {
      const int64_t first =
          c * channel_step + (h_off + h) * row_step + static_cast<int64_t>(w_off) * pixel_step;
      const double* mean_row =
          has_mean_file
              ? mean_.data() + (static_cast<int64_t>(c) * image_height + h_off + h) * image_width +
                    w_off
              : nullptr;
      T* out_row = out + (static_cast<int64_t>(c) * height + h) * width;
      if (image.bytes != nullptr)
        TransformRow(image.bytes + first, pixel_step, mean_row, has_mean_values, mean_value, scale,
                     do_mirror, width, out_row);
      else
        TransformRow(image.floats + first, pixel_step, mean_row, has_mean_values, mean_value, scale,
                     do_mirror, width, out_row);
    }
  }
}

void DataTransformer::Transform(const Datum& datum, Blob* blob, int index,
                                const std::string& what) {
  const Image image = Decode(datum, &decoded_, what);
  const std::vector<int> shape = ShapeOf(image, what);
  if (blob->num_axes() != 4 || blob->shape(1) != shape[1] || blob->shape(2) != shape[2] ||
      blob->shape(3) != shape[3])
    CREMA_THROW_RUNTIME(Named(what), " gives items of ", ShapeText(shape[1], shape[2], shape[3]),
                        " but the batch holds ", blob->shape_string(),
                        " (all records of a batch must have the same size)");
  CREMA_ASSERT(index >= 0 && index < blob->shape(0), "item ", index, " outside ",
               blob->shape_string());
  const Draws draws = NextDraws();
  CREMA_DISPATCH_FLOAT(blob->dtype(), T,
                       Transform(image, draws, blob->mutable_cpu_data<T>() + blob->offset(index)));
}

void DataTransformer::TransformBatch(const std::vector<const Image*>& images,
                                     const std::function<std::string(int)>& what, WorkerPool* pool,
                                     Blob* blob) {
  const int num = static_cast<int>(images.size());
  CREMA_ASSERT(num > 0, "an empty batch");
  std::vector<int> shape = ShapeOf(*images[0], what(0));
  shape[0] = num;
  blob->Reshape(shape);
  std::vector<Draws> draws(static_cast<size_t>(num));
  for (Draws& item_draws : draws) item_draws = NextDraws();
  const int64_t item_count = blob->count(1);
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* out = blob->mutable_cpu_data<T>();
    pool->Run(num, [&](int k, int /*worker*/) {
      const std::vector<int> item_shape = ShapeOf(*images[k], what(k));
      if (!std::equal(item_shape.begin() + 1, item_shape.end(), shape.begin() + 1))
        CREMA_THROW_RUNTIME(what(k), " gives items of ",
                            ShapeText(item_shape[1], item_shape[2], item_shape[3]),
                            " but the batch holds ", ShapeText(shape[1], shape[2], shape[3]),
                            " (all records of a batch must have the same size)");
      Transform(*images[k], draws[k], out + k * item_count);
    });
  });
}

template void DataTransformer::Transform<float>(const Datum&, float*, const std::string&);
template void DataTransformer::Transform<double>(const Datum&, double*, const std::string&);
template void DataTransformer::Transform<float>(const Image&, const Draws&, float*) const;
template void DataTransformer::Transform<double>(const Image&, const Draws&, double*) const;

}  // namespace crema
