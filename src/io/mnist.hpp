#pragma once
// Caffe's convert_mnist_data: MNIST-format idx files (images: magic 2051, count, rows, cols,
// uint8 pixels; labels: magic 2049, count, uint8 labels; big-endian header) -> a DB of Datum
// records keyed by the 0-based item index as 8 zero-padded digits, each with channels 1,
// height rows, width cols, the raw pixels and the label; committed every 1000 records. The
// records are byte-identical to Caffe's. Gzipped idx files (the form they are published in) are
// read with zlib.
#include <cstdint>
#include <functional>
#include <string>

#include "io/db.hpp"

namespace crema {

// Creates `db_path` (which must not exist) and returns the number of records written.
// ConfigError naming the file for a bad magic number, mismatched counts or a truncated file;
// RuntimeError when a file or the DB can't be opened. `progress`, when given, is called with
// (records written, records in all) after each record.
int64_t ConvertMnist(const std::string& images_path, const std::string& labels_path,
                     const std::string& db_path, db::Backend backend = db::Backend::kLmdb,
                     const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace crema
