#pragma once
// HDF5Data: reads rows of HDF5 datasets in batches, as Caffe's HDF5DataLayer.
// hdf5_data_param.source is a text file listing .h5 files (whitespace-separated names, used as
// written). Each top reads the dataset named like the top (float, double or integer; converted
// to the net's type); all datasets of a file must have the same number of rows (axis 0). Top i
// is batch_size x (the trailing dims of its dataset in the first file); later files must have the
// same trailing dims. Rows are read in order; after the last row of a file the next file is
// loaded, after the last file the first again. shuffle: the file order is shuffled at set-up and
// after each pass over the files, the row order whenever a file is (re)started, as Caffe (with
// the layer's own generator, seeded from the thread's generator at set-up).
// Resuming (SaveDataState / RestoreDataState): the file and row order, the next row and the
// generator. NumRecords: the rows of all the files (their headers read once).
// Errors: a source or .h5 file that can't be read, a missing dataset, mismatched rows or trailing
// dims -> RuntimeError naming the file. transform_param is refused (ConfigError), as Caffe.
// No bottoms, no backward.
// shard_id / num_shards (crema): read only the rows whose index i over all the files, in list
// order, has i % num_shards == shard_id (as the Data layer's shards, one per process of a
// multi-process run); NumRecords then counts the shard's rows.
// Params: hdf5_data_param { source, batch_size, shuffle (default false), shard_id (default 0),
// num_shards (default 1) }.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class HDF5DataLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "HDF5Data"; }
  // Device-neutral: rows are read from the HDF5 files on the host by design (as Caffe); the
  // next layer's gpu_data() uploads the batch.
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Tops keep the shape set-up gives them.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

  int64_t NumRecords() const override;
  int64_t BatchSize() const override { return batch_size_; }
  bool SaveDataState(DataLayerState* state) const override;
  void RestoreDataState(const DataLayerState& state) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  // Reads the datasets of file `file_permutation_[current_file_]` into data_.
  void LoadFile();
  void NextRow();
  // Loads the next file (in file_permutation_) that holds rows of the shard.
  void NextFile();
  int64_t Rows(const std::string& path) const;  // of the first top's dataset

  std::string source_;
  int batch_size_ = 0;
  bool shuffle_ = false;
  std::vector<std::string> top_names_;
  std::vector<std::string> files_;
  std::vector<int> file_permutation_;
  std::vector<int64_t> row_permutation_;
  std::vector<std::unique_ptr<Blob>> data_;   // one per top: the current file's dataset
  std::vector<std::vector<int>> row_shapes_;  // per top: the trailing dims fixed at set-up
  int current_file_ = 0;
  int64_t current_row_ = 0;
  std::mt19937 rng_;
  mutable int64_t num_records_ = -1;  // counted on first use
  int64_t shard_id_ = 0, num_shards_ = 1;
  std::vector<int64_t> first_rows_;  // with shards: file k's first row among all files' rows
};

}  // namespace crema
