// crema convert-weights IN.caffemodel OUT.caffemodel --fp16 | --fp32: stores a .caffemodel's
// weights as IEEE half precision (BlobProto.half_data, a crema field Caffe's parser skips) or
// back as float32 (`data`, which Caffe reads).
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "verb.hpp"

DEFINE_bool(fp16, false,
            "convert-weights: store the weights as IEEE half precision (about half the size).");
DEFINE_bool(fp32, false, "convert-weights: store the weights as float32 again (Caffe reads it).");

namespace crema::cli {
namespace {

struct Totals {
  int64_t blobs = 0;
  int64_t values = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;  // of values in fp16's normal range
  int64_t flushed = 0;       // non-zero values that became zero
};

// Moves `data` (or `double_data`) into `half_data`; ConfigError for values beyond fp16's range.
void ToHalf(const std::string& where, BlobProto* blob, Totals* totals) {
  std::vector<float> values(blob->data().begin(), blob->data().end());
  if (blob->double_data_size() > 0)
    values.assign(blob->double_data().begin(), blob->double_data().end());
  if (values.empty()) return;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    const float back = HalfToFloat(FloatToHalf(values[i]));
    if (std::isinf(back))
      CREMA_THROW_CONFIG(where, ": value ", values[i], " (element ", i,
                         ") is beyond the fp16 range (|x| <= 65504); keep these weights in fp32");
    const double error = std::fabs(static_cast<double>(back) - values[i]);
    totals->max_abs_error = std::max(totals->max_abs_error, error);
    if (std::fabs(values[i]) >= 6.103515625e-05)  // 2^-14, the smallest normal half
      totals->max_rel_error = std::max(totals->max_rel_error, error / std::fabs(values[i]));
    if (back == 0 && values[i] != 0) ++totals->flushed;
  }
  blob->set_half_data(PackHalves(values.data(), static_cast<int64_t>(values.size())));
  blob->clear_data();
  blob->clear_double_data();
  ++totals->blobs;
  totals->values += static_cast<int64_t>(values.size());
}

void ToFloat(BlobProto* blob, Totals* totals) {
  if (!blob->has_half_data()) return;
  const std::string halves = blob->half_data();
  const int64_t count = static_cast<int64_t>(halves.size() / 2);
  blob->clear_half_data();
  blob->mutable_data()->Resize(static_cast<int>(count), 0.0f);
  for (int64_t i = 0; i < count; ++i) blob->set_data(static_cast<int>(i), UnpackHalf(halves, i));
  ++totals->blobs;
  totals->values += count;
}

int RunConvertWeights(const std::vector<std::string>& args) {
  if (args.size() != 2)
    CREMA_THROW_CONFIG("convert-weights takes 2 arguments (IN.caffemodel OUT.caffemodel), got ",
                       args.size(), " (crema convert-weights --help)");
  if (FLAGS_fp16 == FLAGS_fp32)
    CREMA_THROW_CONFIG("convert-weights: give exactly one of --fp16 and --fp32");
  const std::string& in = args[0];
  const std::string& out = args[1];
  if (in.size() >= 3 && in.compare(in.size() - 3, 3, ".h5") == 0)
    CREMA_THROW_CONFIG(in, ": convert-weights reads binary .caffemodel files, not HDF5");
  NetParameter param;
  ReadNetParamsFromBinaryFile(in, &param);
  Totals totals;
  for (LayerParameter& layer : *param.mutable_layer()) {
    for (int j = 0; j < layer.blobs_size(); ++j) {
      BlobProto* blob = layer.mutable_blobs(j);
      if (blob->half_data().size() % 2 != 0)
        CREMA_THROW_CONFIG(in, ": layer \"", layer.name(), "\" blob ", j,
                           ": half_data has an odd number of bytes");
      if (FLAGS_fp16)
        ToHalf(StrCat(in, ": layer \"", layer.name(), "\" blob ", j), blob, &totals);
      else
        ToFloat(blob, &totals);
    }
  }
  WriteBinaryProto(param, out);
  std::error_code ec;
  const auto in_size = std::filesystem::file_size(in, ec);
  const auto out_size = std::filesystem::file_size(out, ec);
  std::printf("%s -> %s: %lld blob(s), %lld value(s) now %s; %lld -> %lld bytes\n", in.c_str(),
              out.c_str(), static_cast<long long>(totals.blobs),
              static_cast<long long>(totals.values), FLAGS_fp16 ? "fp16" : "fp32",
              static_cast<long long>(in_size), static_cast<long long>(out_size));
  if (FLAGS_fp16)
    std::printf(
        "rounding: max abs error %.3g, max rel error %.3g (normal range), %lld tiny "
        "value(s) flushed to 0\n",
        totals.max_abs_error, totals.max_rel_error, static_cast<long long>(totals.flushed));
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    convert_weights, "convert-weights", "store a .caffemodel's weights as fp16 (or back as fp32)",
    "crema convert-weights IN.caffemodel OUT.caffemodel --fp16 | --fp32\n"
    "  --fp16: every blob's values become IEEE half precision (round to nearest even) in the\n"
    "  crema-only field BlobProto.half_data (10000): the file is about half the size. crema\n"
    "  loads it anywhere it loads weights (--weights, solver `weights`), widening the values to\n"
    "  the blob's type; BVLC Caffe skips the field and would see empty blobs, so keep the fp32\n"
    "  file for Caffe. A value beyond fp16's range (|x| > 65504) is an error; the largest\n"
    "  rounding errors and the count of tiny values flushed to zero are printed.\n"
    "  --fp32: converts half_data back to float `data` (exact), readable by Caffe again.",
    {"fp16", "fp32"}, &crema::cli::RunConvertWeights);
