// crema extract-features: Caffe's extract_features tool. Builds the net (TEST phase unless
// --phase), loads --weights, runs --iterations forward passes and saves, for each blob of
// --blobs, one vector per item (the blob's first axis) of every pass:
//   lmdb / leveldb: DIR/<blob>_<backend>, one Datum per item, as Caffe writes them: key
//     "%010d" (the item's running index for that blob), channels/height/width = the blob's
//     legacy axes 1-3 (1 when absent), float_data = the item's values, no label; committed
//     every 1000 items.
//   npy: DIR/<blob>.npy, float32 (iterations * num, axes 1..) in C order.
//   hdf5: DIR/features.h5, one float32 dataset per blob, shaped as the .npy.
// Characters of a blob name outside [A-Za-z0-9_.-] become '~' in file and dataset names (as in
// `crema forward`). Everything is written into a temporary folder and moved into DIR at the end,
// so a failure leaves nothing under the final names.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "io/npy.hpp"
#include "net/weights_match.hpp"
#include "staging.hpp"
#include "verb.hpp"

DEFINE_string(blobs, "",
              "The blobs to save, separated by commas (e.g. fc7,prob); `crema inspect` lists a "
              "net's blobs.");
DEFINE_string(output, "",
              "The folder the features are written into (created when missing): "
              "<blob>_lmdb, <blob>_leveldb, <blob>.npy or features.h5.");
DEFINE_string(format, "lmdb",
              "How results are saved: extract-features: lmdb, leveldb, npy or hdf5 (default "
              "lmdb); classify, detect: csv or jsonl (default csv).");

namespace crema::cli {
namespace {

enum class Format { kLmdb, kLevelDb, kNpy, kHdf5 };

Format ParseFormat(const std::string& text) {
  std::string name = text;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name == "lmdb") return Format::kLmdb;
  if (name == "leveldb") return Format::kLevelDb;
  if (name == "npy") return Format::kNpy;
  if (name == "hdf5" || name == "h5") return Format::kHdf5;
  CREMA_THROW_CONFIG("--format must be lmdb, leveldb, npy or hdf5, got \"", text, "\"");
}

std::string SafeName(const std::string& blob) {
  std::string out = blob;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '~';
  return out;
}

// The blob's values as float, whatever its element type.
std::vector<float> FloatValues(const Blob& blob) {
  if (blob.dtype() == DataType::kFloat32) {
    const float* data = blob.cpu_data<float>();
    return std::vector<float>(data, data + blob.count());
  }
  std::vector<float> values(static_cast<size_t>(blob.count()));
  for (int64_t i = 0; i < blob.count(); ++i) values[i] = static_cast<float>(blob.data_at(i));
  return values;
}

// Caffe's num(): the first axis, 1 for a scalar.
int Items(const Blob& blob) { return blob.num_axes() == 0 ? 1 : blob.shape(0); }

// Where one blob's features go.
class Sink {
 public:
  explicit Sink(std::string blob) : blob_(std::move(blob)) {}
  virtual ~Sink() = default;
  // Saves the items of one forward pass.
  virtual void Add(const Blob& blob, int iteration) = 0;
  int64_t items() const { return items_; }

 protected:
  std::string blob_;
  int64_t items_ = 0;
};

class DbSink final : public Sink {
 public:
  DbSink(std::string blob, db::Backend backend, const std::string& path)
      : Sink(std::move(blob)), db_(db::OpenDB(backend, path, db::Mode::kNew)) {
    txn_ = db_->NewTransaction();
  }
  ~DbSink() override {
    txn_.reset();
    db_.reset();
  }
  void Add(const Blob& blob, int iteration) override {
    if (blob.num_axes() > 4)
      CREMA_THROW_RUNTIME("blob \"", blob_, "\" has ", blob.num_axes(), " axes at iteration ",
                          iteration, " (", blob.shape_string(),
                          "); a Datum holds at most 4: use --format npy or hdf5");
    const int items = Items(blob);
    const int64_t dim = items == 0 ? 0 : blob.count() / items;
    const std::vector<float> values = FloatValues(blob);
    Datum datum;
    datum.set_channels(blob.channels());
    datum.set_height(blob.height());
    datum.set_width(blob.width());
    std::string value;
    for (int n = 0; n < items; ++n) {
      datum.clear_float_data();
      for (int64_t d = 0; d < dim; ++d) datum.add_float_data(values[n * dim + d]);
      datum.SerializeToString(&value);
      char key[16];
      std::snprintf(key, sizeof(key), "%010lld", static_cast<long long>(items_));
      txn_->Put(key, value);
      if (++items_ % 1000 == 0) {
        txn_->Commit();
        LOG(INFO) << "Extracted features of " << items_ << " items for blob " << blob_;
      }
    }
  }
  void Finish() {
    if (items_ % 1000 != 0) txn_->Commit();
  }

 private:
  std::unique_ptr<db::DB> db_;
  std::unique_ptr<db::Transaction> txn_;
};

// Collects every pass into one (iterations * num, axes 1..) array.
class ArraySink final : public Sink {
 public:
  ArraySink(std::string blob, int iterations) : Sink(std::move(blob)), iterations_(iterations) {}
  void Add(const Blob& blob, int iteration) override {
    if (iteration == 0) {
      shape_ = blob.shape();
      std::vector<int> all = shape_;
      const int64_t rows = static_cast<int64_t>(Items(blob)) * iterations_;
      if (rows > INT32_MAX)
        CREMA_THROW_RUNTIME("blob \"", blob_, "\": ", rows, " items are too many for one array");
      if (all.empty())
        all.push_back(static_cast<int>(rows));
      else
        all[0] = static_cast<int>(rows);
      values_.Reshape(all);
    } else if (blob.shape() != shape_) {
      CREMA_THROW_RUNTIME("blob \"", blob_, "\" changed shape from ", ShapeString(shape_), " to ",
                          blob.shape_string(), " at iteration ", iteration,
                          "; --format npy and hdf5 need the same shape in every pass (lmdb and "
                          "leveldb do not)");
    }
    const std::vector<float> values = FloatValues(blob);
    std::copy(values.begin(), values.end(),
              values_.mutable_cpu_data<float>() + static_cast<int64_t>(iteration) * blob.count());
    items_ += Items(blob);
  }
  const Blob& values() const { return values_; }

 private:
  static std::string ShapeString(const std::vector<int>& shape) {
    std::string s;
    for (int d : shape) s += std::to_string(d) + " ";
    return s + "(" + std::to_string(shape.size()) + " axes)";
  }
  int iterations_;
  std::vector<int> shape_;
  Blob values_;
};

std::string OutputName(Format format, const std::string& blob) {
  switch (format) {
    case Format::kLmdb:
      return SafeName(blob) + "_lmdb";
    case Format::kLevelDb:
      return SafeName(blob) + "_leveldb";
    case Format::kNpy:
      return SafeName(blob) + ".npy";
    case Format::kHdf5:
      break;
  }
  return "features.h5";
}

int RunExtractFeatures(const std::vector<std::string>& args) {
  if (!args.empty())
    CREMA_THROW_CONFIG("extract-features takes no positional arguments, got \"", args[0],
                       "\" (crema extract-features --help)");
  RequireFlag("model", FLAGS_model);
  RequireFlag("blobs", FLAGS_blobs);
  RequireFlag("output", FLAGS_output);
  if (gflags::GetCommandLineFlagInfoOrDie("iterations").is_default)
    CREMA_THROW_CONFIG(
        "--iterations is required (the number of forward passes; each saves one "
        "batch of items)");
  if (FLAGS_iterations <= 0) CREMA_THROW_CONFIG("--iterations must be > 0, got ", FLAGS_iterations);
  const Format format = ParseFormat(FLAGS_format);
  if (format == Format::kLevelDb) db::GetDB(db::Backend::kLevelDb);  // fails early without it
  const std::vector<std::string> blobs = SplitList(FLAGS_blobs);

  const Device device = DeviceFromFlags();
  std::unique_ptr<Net> net =
      Net::FromFile(FLAGS_model, PhaseFromFlag(TEST), FLAGS_level, StagesFromFlag(), device);
  if (FLAGS_weights.empty())
    std::fprintf(stderr, "note: no --weights given: the layers keep their fillers' values\n");
  for (const std::string& weights : SplitList(FLAGS_weights))
    CopyWeightsRequiringAMatch(net.get(), weights);

  std::set<std::string> seen, names;
  for (const std::string& blob : blobs) {
    if (!net->has_blob(blob)) {
      std::string available;
      for (const std::string& name : net->blob_names())
        available += (available.empty() ? "" : ", ") + name;
      CREMA_THROW_CONFIG("--blobs: net \"", net->name(), "\" (", FLAGS_model, ") has no blob \"",
                         blob, "\"; its blobs are: ", available);
    }
    if (!seen.insert(blob).second) CREMA_THROW_CONFIG("--blobs names \"", blob, "\" twice");
    if (format != Format::kHdf5 && !names.insert(OutputName(format, blob)).second)
      CREMA_THROW_CONFIG("--blobs: two blobs would be saved as ", OutputName(format, blob));
    if ((format == Format::kLmdb || format == Format::kLevelDb) &&
        net->blob_by_name(blob)->num_axes() > 4)
      CREMA_THROW_CONFIG("--blobs: blob \"", blob, "\" has ", net->blob_by_name(blob)->num_axes(),
                         " axes; a Datum holds at most 4: use --format npy or hdf5");
  }
  // Only the extracted blobs are read: the rest may share memory.
  net->SetMemoryPlan(MemoryPlanFromFlag(MemoryPlan::kInference), blobs);
  std::set<std::string> datasets;
  for (const std::string& blob : blobs)
    if (format == Format::kHdf5 && !datasets.insert(SafeName(blob)).second)
      CREMA_THROW_CONFIG("--blobs: two blobs would be saved as the dataset ", SafeName(blob));

  std::vector<std::string> outputs;
  if (format == Format::kHdf5)
    outputs.push_back(OutputName(format, ""));
  else
    for (const std::string& blob : blobs) outputs.push_back(OutputName(format, blob));
  StagingDir out(FLAGS_output, outputs);

  std::vector<std::unique_ptr<DbSink>> db_sinks;
  std::vector<std::unique_ptr<ArraySink>> array_sinks;
  std::vector<Sink*> sinks;
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (format == Format::kLmdb || format == Format::kLevelDb) {
      const db::Backend backend =
          format == Format::kLmdb ? db::Backend::kLmdb : db::Backend::kLevelDb;
      db_sinks.push_back(std::make_unique<DbSink>(blobs[i], backend, out.Path(outputs[i])));
      sinks.push_back(db_sinks.back().get());
    } else {
      array_sinks.push_back(std::make_unique<ArraySink>(blobs[i], FLAGS_iterations));
      sinks.push_back(array_sinks.back().get());
    }
  }

  LOG(INFO) << "Extracting features of " << FLAGS_blobs << " over " << FLAGS_iterations
            << " forward passes";
  for (int iteration = 0; iteration < FLAGS_iterations; ++iteration) {
    net->Forward();
    for (size_t i = 0; i < blobs.size(); ++i)
      sinks[i]->Add(*net->blob_by_name(blobs[i]), iteration);
  }

  for (auto& sink : db_sinks) sink->Finish();
  std::vector<int64_t> items;  // read now: `sinks` points into db_sinks, cleared next
  for (Sink* sink : sinks) items.push_back(sink->items());
  db_sinks.clear();  // closes the DBs before they are moved
  if (format == Format::kNpy) {
    for (size_t i = 0; i < blobs.size(); ++i)
      WriteBlobNpy(out.Path(outputs[i]), array_sinks[i]->values());
  } else if (format == Format::kHdf5) {
    Hdf5File file(out.Path(outputs[0]), Hdf5File::Mode::kCreate);
    for (size_t i = 0; i < blobs.size(); ++i)
      WriteBlobToHDF5(file.id(), SafeName(blobs[i]), array_sinks[i]->values(), false);
    file.Close();
  }
  out.Commit();
  for (size_t i = 0; i < blobs.size(); ++i) {
    const std::string where = format == Format::kHdf5
                                  ? out.FinalPath(outputs[0]) + ":/" + SafeName(blobs[i])
                                  : out.FinalPath(outputs[i]);
    std::printf("%s: %lld items -> %s\n", blobs[i].c_str(), static_cast<long long>(items[i]),
                where.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    extract_features, "extract-features",
    "save chosen blobs over N forward passes (Caffe's extract_features)",
    "crema extract-features --model NET.prototxt [--weights W.caffemodel] --blobs fc7,prob\n"
    "    --iterations N --output DIR [--format lmdb|leveldb|npy|hdf5] [--phase TEST] [--gpu ID]\n\n"
    "Runs N forward passes of the net (its data layers read one batch each) and saves each blob\n"
    "of --blobs, one vector per item (first axis), into DIR (created when missing):\n"
    "  lmdb, leveldb: DIR/<blob>_lmdb (_leveldb): Datum records as Caffe's extract_features\n"
    "    writes them: key \"%010d\" (item index), float_data, channels/height/width of the blob;\n"
    "  npy: DIR/<blob>.npy, float32, shape (N * num, rest of the blob's shape);\n"
    "  hdf5: DIR/features.h5 with one float32 dataset per blob, shaped as the .npy.\n"
    "Blob names become file names with characters outside [A-Za-z0-9_.-] replaced by '~'.\n"
    "Existing outputs are not overwritten; a failure leaves nothing under their names.",
    {"memory_plan", "model", "weights", "blobs", "iterations", "output", "format", "phase", "stage",
     "level", "gpu", "math", "cudnn_workspace_mb", "deterministic"},
    &crema::cli::RunExtractFeatures);
