// crema compute-image-mean DB [MEAN_FILE]: Caffe's compute_image_mean. Averages the Datum
// records of DB (raw uint8 pixels, float_data, or encoded images decoded as stored: gray stays
// gray, colour is BGR) into a 1 x C x H x W BlobProto (num/channels/height/width fields, as Caffe
// writes it) and prints the mean of each channel. The sums are float, as Caffe's, so the file
// is bit-identical to Caffe's.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "io/input_checks.hpp"
#include "verb.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#endif

namespace crema::cli {
namespace {

// Caffe's DecodeDatumNative: an encoded record becomes raw C x H x W pixels.
void DecodeNative(Datum* datum, const std::string& what) {
  if (!datum->encoded()) return;
#ifdef CREMA_WITH_OPENCV
  const std::string& data = datum->data();
  CheckEncodedImageSize(data, 3, what);
  cv::Mat image;
  try {
    const cv::Mat raw(1, static_cast<int>(data.size()), CV_8UC1, const_cast<char*>(data.data()));
    image = cv::imdecode(raw, cv::IMREAD_ANYCOLOR);
  } catch (const cv::Exception& e) {
    CREMA_THROW_RUNTIME(what, ": cannot decode the encoded image: ", OneLineMessage(e.what()));
  }
  if (image.empty() || image.depth() != CV_8U)
    CREMA_THROW_RUNTIME(what, ": cannot decode the encoded image (", data.size(),
                        " bytes; corrupt, or not a JPEG/PNG OpenCV can read)");
  InterleavedToDatum(image.ptr<uint8_t>(0), image.step, image.channels(), image.rows, image.cols,
                     datum);
#else
  CREMA_THROW_RUNTIME(what, " holds an encoded image; this crema was built without OpenCV");
#endif
}

int RunComputeImageMean(const std::vector<std::string>& args) {
  if (args.empty() || args.size() > 2)
    CREMA_THROW_CONFIG("compute-image-mean takes 1 or 2 arguments (DB [MEAN_FILE]), got ",
                       args.size(), " (crema compute-image-mean --help)");
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  auto db = db::OpenDB(backend, args[0], db::Mode::kRead);
  auto cursor = db->NewCursor();
  if (!cursor->valid()) CREMA_THROW_RUNTIME("the DB '", args[0], "' holds no records");

  BlobProto sum;
  int64_t count = 0, size = -1;
  Datum datum;
  for (; cursor->valid(); cursor->Next()) {
    const std::string what = "record '" + cursor->key() + "' of " + args[0];
    ParseDatum(cursor->value(), &datum, what);
    DecodeNative(&datum, what);
    const bool bytes = !datum.data().empty();
    const int64_t n = bytes ? static_cast<int64_t>(datum.data().size()) : datum.float_data_size();
    if (size < 0) {  // the first record gives the shape
      size = static_cast<int64_t>(datum.channels()) * datum.height() * datum.width();
      sum.set_num(1);
      sum.set_channels(datum.channels());
      sum.set_height(datum.height());
      sum.set_width(datum.width());
      sum.mutable_data()->Resize(static_cast<int>(n), 0.0f);
    }
    if (n != size || n != sum.data_size())
      CREMA_THROW_RUNTIME(what, " has ", n, " values, but the first record is ", sum.channels(),
                          " x ", sum.height(), " x ", sum.width(), " = ", size,
                          " (all images must have the same size)");
    // Float sums, as Caffe.
    float* acc = sum.mutable_data()->mutable_data();
    if (bytes) {
      const std::string& data = datum.data();
      for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<float>(static_cast<uint8_t>(data[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) acc[i] += datum.float_data(static_cast<int>(i));
    }
    if (++count % 10000 == 0) {
      std::printf("processed %lld records\n", static_cast<long long>(count));
      std::fflush(stdout);
    }
  }
  float* acc = sum.mutable_data()->mutable_data();
  for (int i = 0; i < sum.data_size(); ++i) acc[i] = acc[i] / static_cast<float>(count);
  std::printf("processed %lld records of %d x %d x %d\n", static_cast<long long>(count),
              sum.channels(), sum.height(), sum.width());

  if (args.size() == 2) {
    std::ofstream out(args[1], std::ios::binary | std::ios::trunc);
    if (!out || !sum.SerializeToOstream(&out) || !out.flush())
      CREMA_THROW_RUNTIME("cannot write the mean file '", args[1], "'");
    std::printf("wrote %s\n", args[1].c_str());
  }
  const int dim = sum.height() * sum.width();
  for (int c = 0; c < sum.channels(); ++c) {
    float channel = 0;
    for (int i = 0; i < dim; ++i) channel += sum.data(dim * c + i);
    std::printf("mean_value channel [%d]: %g\n", c, static_cast<double>(channel / dim));
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(compute_image_mean, "compute-image-mean",
                    "average the images of a Datum DB into a mean .binaryproto",
                    "crema compute-image-mean DB [MEAN_FILE] [--backend lmdb]\n"
                    "  DB: a Datum DB (e.g. from convert-imageset; encoded records are decoded);\n"
                    "  MEAN_FILE: the .binaryproto to write (1 x C x H x W, Caffe's format), for\n"
                    "  transform_param.mean_file. Prints the mean of each channel, for\n"
                    "  transform_param.mean_value.",
                    {"backend"}, &crema::cli::RunComputeImageMean);
