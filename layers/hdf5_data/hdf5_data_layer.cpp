#include "layers/hdf5_data/hdf5_data_layer.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "io/hdf5.hpp"

namespace crema {
namespace {

std::string ShapeText(const std::vector<int>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + ")";
}

}  // namespace

void HDF5DataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const HDF5DataParameter& param = layer_param_.hdf5_data_param();
  CREMA_CHECK_PARAM(!layer_param_.has_transform_param(), "transform_param",
                    "is not supported: HDF5Data does not transform data (as Caffe)");
  source_ = param.source();
  CREMA_CHECK_PARAM(!source_.empty(), "hdf5_data_param.source",
                    "is required (a text file listing .h5 files)");
  CREMA_CHECK_PARAM(param.batch_size() > 0 && param.batch_size() <= INT32_MAX,
                    "hdf5_data_param.batch_size", "must be > 0, got ", param.batch_size());
  batch_size_ = static_cast<int>(param.batch_size());
  shuffle_ = param.shuffle();
  CREMA_CHECK_PARAM(param.num_shards() > 0, "hdf5_data_param.num_shards", "must be > 0, got ",
                    param.num_shards());
  CREMA_CHECK_PARAM(param.shard_id() < param.num_shards(), "hdf5_data_param.shard_id",
                    "must be < num_shards (", param.num_shards(), "), got ", param.shard_id());
  shard_id_ = param.shard_id();
  num_shards_ = param.num_shards();
  CREMA_CHECK_PARAM(layer_param_.top_size() == static_cast<int>(top.size()), "top",
                    "HDF5Data reads the dataset named like each top, so every top needs a name: ",
                    layer_param_.top_size(), " names for ", top.size(), " tops");
  top_names_.assign(layer_param_.top().begin(), layer_param_.top().end());

  std::ifstream list(source_);
  if (!list)
    throw RuntimeError(ErrorPrefix("hdf5_data_param.source") +
                       StrCat("cannot open hdf5_data_param.source '", source_, "'"));
  files_.clear();
  for (std::string name; list >> name;) files_.push_back(name);
  if (files_.empty())
    throw RuntimeError(ErrorPrefix("hdf5_data_param.source") +
                       StrCat("hdf5_data_param.source '", source_, "' lists no HDF5 files"));
  LOG(INFO) << "HDF5Data layer \"" << name() << "\": " << files_.size() << " files in " << source_;
  first_rows_.assign(1, 0);
  if (num_shards_ > 1) {  // each file's first row among the rows of all files, for the shard
    for (const std::string& path : files_) first_rows_.push_back(first_rows_.back() + Rows(path));
    const int64_t total = first_rows_.back(), id = shard_id_, shards = num_shards_;
    num_records_ = total > id ? (total - id + shards - 1) / shards : 0;
    if (num_records_ == 0)
      throw RuntimeError(ErrorPrefix("hdf5_data_param.shard_id") +
                         StrCat("the files of '", source_, "' hold ", total,
                                " rows, none of them in shard_id ", shard_id_, " of num_shards ",
                                num_shards_));
    LOG(INFO) << "HDF5Data layer \"" << name() << "\" reads shard " << shard_id_ << " of "
              << num_shards_ << ": " << num_records_ << " of " << total << " rows";
  }

  file_permutation_.resize(files_.size());
  std::iota(file_permutation_.begin(), file_permutation_.end(), 0);
  if (shuffle_) {
    rng_.seed(NextSeed());
    std::shuffle(file_permutation_.begin(), file_permutation_.end(), rng_);
  }
  current_file_ = 0;
  row_shapes_.clear();
  LoadFile();
  current_row_ = 0;
  if (row_permutation_.empty()) NextFile();

  for (size_t i = 0; i < top.size(); ++i) {
    if (top[i]->dtype() != dtype_) top[i]->set_dtype(dtype_);
    std::vector<int> shape = data_[i]->shape();
    shape[0] = batch_size_;
    top[i]->Reshape(shape);
  }
}

void HDF5DataLayer::LoadFile() {
  const std::string& path = files_[file_permutation_[current_file_]];
  DLOG(INFO) << "HDF5Data layer \"" << name() << "\" loads " << path;
  const bool first = row_shapes_.empty();
  try {
    Hdf5File file(path, Hdf5File::Mode::kRead);
    data_.resize(top_names_.size());
    for (size_t i = 0; i < top_names_.size(); ++i) {
      const std::string& dataset = top_names_[i];
      if (!Hdf5HasDataset(file.id(), dataset))
        throw RuntimeError(StrCat("HDF5 file '", path, "' (listed in '", source_,
                                  "') has no dataset \"", dataset, "\" for top \"", dataset, "\""));
      if (!data_[i]) data_[i] = std::make_unique<Blob>(dtype_);
      ReadBlobFromHDF5(file.id(), dataset, data_[i].get(), true);
      const std::vector<int>& shape = data_[i]->shape();
      if (shape.empty())
        throw RuntimeError(StrCat("HDF5 dataset ", Hdf5Where(file.id(), dataset),
                                  " is a scalar; HDF5Data needs rows (at least one axis)"));
      std::vector<int> row(shape.begin() + 1, shape.end());
      if (first) {
        row_shapes_.push_back(row);
      } else if (row != row_shapes_[i]) {
        throw RuntimeError(StrCat("HDF5 dataset ", Hdf5Where(file.id(), dataset), " has shape ",
                                  ShapeText(shape), ", but rows of ", ShapeText(row_shapes_[i]),
                                  " were set up from '", files_[file_permutation_[0]], "'"));
      }
      if (shape[0] != data_[0]->shape(0))
        throw RuntimeError(StrCat("HDF5 file '", path, "': dataset \"", dataset, "\" has ",
                                  shape[0], " rows but \"", top_names_[0], "\" has ",
                                  data_[0]->shape(0)));
    }
    if (data_[0]->shape(0) == 0) throw RuntimeError(StrCat("HDF5 file '", path, "' holds no rows"));
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix() + e.what());
  } catch (const ConfigError& e) {
    // The helpers report missing objects and odd types as ConfigError; here it is the data.
    throw RuntimeError(ErrorPrefix() + StrCat("HDF5 file '", path, "': ", e.what()));
  }
  // The rows of the shard (all without sharding), in order or shuffled.
  row_permutation_.clear();
  const int64_t offset = num_shards_ > 1 ? first_rows_[file_permutation_[current_file_]] : 0;
  for (int64_t row = 0; row < data_[0]->shape(0); ++row)
    if ((offset + row) % num_shards_ == shard_id_) row_permutation_.push_back(row);
  if (shuffle_) std::shuffle(row_permutation_.begin(), row_permutation_.end(), rng_);
}

void HDF5DataLayer::NextFile() {
  do {  // a file may hold no row of the shard; set-up made sure that some file does
    if (++current_file_ == static_cast<int>(files_.size())) {
      current_file_ = 0;
      if (shuffle_) std::shuffle(file_permutation_.begin(), file_permutation_.end(), rng_);
      DLOG(INFO) << "HDF5Data layer \"" << name() << "\" loops around to the first file";
    }
    LoadFile();  // shuffles the new file's rows
  } while (row_permutation_.empty());
}

void HDF5DataLayer::NextRow() {
  if (++current_row_ < static_cast<int64_t>(row_permutation_.size())) return;
  if (files_.size() > 1)
    NextFile();
  else if (shuffle_)
    std::shuffle(row_permutation_.begin(), row_permutation_.end(), rng_);
  current_row_ = 0;
}

int64_t HDF5DataLayer::Rows(const std::string& path) const {
  try {
    Hdf5File file(path, Hdf5File::Mode::kRead);
    const std::vector<int> shape = Hdf5DatasetShape(file.id(), top_names_[0]);
    return shape.empty() ? 0 : shape[0];
  } catch (const std::exception& e) {
    throw RuntimeError(ErrorPrefix() + StrCat("HDF5 file '", path, "': ", e.what()));
  }
}

int64_t HDF5DataLayer::NumRecords() const {
  if (num_records_ < 0) {
    int64_t rows = 0;
    for (const std::string& path : files_) rows += Rows(path);
    num_records_ = rows;
  }
  return num_records_;
}

bool HDF5DataLayer::SaveDataState(DataLayerState* state) const {
  state->Clear();
  state->set_layer(name());
  state->set_type(type());
  state->set_file(current_file_);
  state->set_position(current_row_);
  state->mutable_file_order()->Assign(file_permutation_.begin(), file_permutation_.end());
  if (shuffle_) {
    state->mutable_order()->Assign(row_permutation_.begin(), row_permutation_.end());
    state->set_shuffle_rng(EngineState(rng_));
  }
  return true;
}

void HDF5DataLayer::RestoreDataState(const DataLayerState& state) {
  const std::string changed = ErrorPrefix() + StrCat("cannot resume reading '", source_,
                                                     "': the data has changed since the snapshot");
  const int64_t num_files = static_cast<int64_t>(files_.size());
  std::vector<bool> seen(files_.size(), false);
  bool valid = state.file_order_size() == num_files && state.file() >= 0 &&
               state.file() < num_files && state.position() >= 0;
  for (int i = 0; valid && i < state.file_order_size(); ++i) {
    const int64_t index = state.file_order(i);
    valid = index >= 0 && index < num_files && !seen[index];
    if (valid) seen[index] = true;
  }
  if (!valid) throw RuntimeError(changed);
  file_permutation_.assign(state.file_order().begin(), state.file_order().end());
  current_file_ = static_cast<int>(state.file());
  LoadFile();
  const int64_t rows = data_[0]->shape(0), shard_rows = row_permutation_.size();
  if (state.position() >= shard_rows || (shuffle_ && state.order_size() != shard_rows))
    throw RuntimeError(changed);
  if (shuffle_) {
    row_permutation_.assign(state.order().begin(), state.order().end());
    for (const int64_t row : row_permutation_)
      if (row < 0 || row >= rows) throw RuntimeError(changed);
    SetEngineState(state.shuffle_rng(), &rng_);
  }
  current_row_ = state.position();
}

void HDF5DataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  const size_t element = SizeOf(dtype_);
  for (int item = 0; item < batch_size_; ++item) {
    const int64_t row = row_permutation_[current_row_];
    for (size_t j = 0; j < top.size(); ++j) {
      const int64_t dim = data_[j]->count() / data_[j]->shape(0);
      const char* from = static_cast<const char*>(data_[j]->data()->cpu_data());
      char* to = static_cast<char*>(top[j]->data()->mutable_cpu_data());
      std::memcpy(to + item * dim * element, from + row * dim * element, dim * element);
    }
    NextRow();
  }
}

CREMA_REGISTER_LAYER(HDF5Data, HDF5DataLayer);

}  // namespace crema
