// crema convert-cifar10 INPUT_FOLDER OUTPUT_FOLDER: Caffe's examples/cifar10/convert_cifar10_data.
// The binary release (cifar-10-batches-bin) has five training batches data_batch_{1..5}.bin and
// test_batch.bin, each 10000 records of 1 label byte (0-9) and 3072 pixel bytes (the R, G and B
// 32 x 32 planes). They become OUTPUT_FOLDER/cifar10_train_<backend> (50000 records, keys
// "00000".."49999": batch index * 10000 + record) and cifar10_test_<backend> (10000, keys
// "00000".."09999"), each a Datum {channels 3, height 32, width 32, data: the 3072 bytes as
// stored (RGB planes, not BGR), label}: byte-identical to Caffe's records. Every batch file is
// checked (size, labels) before anything is written, and the DBs are written into a temporary
// folder and moved into place at the end, so a failure leaves no DB under the final names.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "io/db.hpp"
#include "progress.hpp"
#include "staging.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

constexpr int kSize = 32;
constexpr int kImageBytes = 3 * kSize * kSize;
constexpr int kRecordBytes = 1 + kImageBytes;
constexpr int kRecordsPerBatch = 10000;
constexpr int kTrainBatches = 5;
constexpr int kClasses = 10;

std::string BatchName(int batch) {  // 0..4 training, 5 test
  return batch < kTrainBatches ? "data_batch_" + std::to_string(batch + 1) + ".bin"
                               : "test_batch.bin";
}

// A file's size; RuntimeError when it can't be read.
int64_t FileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    CREMA_THROW_RUNTIME("cannot open the CIFAR-10 batch '", path, "': ", std::strerror(errno),
                        " (INPUT_FOLDER is the extracted cifar-10-batches-bin folder of "
                        "cifar-10-binary.tar.gz)");
  if (!S_ISREG(st.st_mode)) CREMA_THROW_RUNTIME("'", path, "' is not a file");
  return st.st_size;
}

// RuntimeError naming the file and the record when its size is not that of 10000 records.
void CheckBatchSize(const std::string& path) {
  const int64_t size = FileSize(path);
  const int64_t expected = static_cast<int64_t>(kRecordsPerBatch) * kRecordBytes;
  if (size < expected)
    CREMA_THROW_RUNTIME("'", path, "' is truncated: ", size, " bytes end in record ",
                        size / kRecordBytes, " (0-based) after ", size % kRecordBytes, " of its ",
                        kRecordBytes, " bytes; a CIFAR-10 batch holds ", kRecordsPerBatch,
                        " records of ", kRecordBytes, " bytes (1 label, ", kImageBytes,
                        " pixels) = ", expected, " bytes");
  if (size > expected)
    CREMA_THROW_RUNTIME("'", path, "' is ", size, " bytes; a CIFAR-10 batch holds ",
                        kRecordsPerBatch, " records of ", kRecordBytes, " bytes = ", expected,
                        " bytes (is it a CIFAR-100 or a python-version file?)");
}

// Appends the 10000 records of one batch file to `txn`, keys counting from `first_key`, which
// is also the count `progress` continues from. `shown` is the DB's final path, for the line
// printed at the end of the batch.
void ConvertBatch(const std::string& path, int first_key, const std::string& shown,
                  db::Transaction* txn, ConvertProgress* progress) {
  std::ifstream in(path, std::ios::binary);
  if (!in) CREMA_THROW_RUNTIME("cannot open the CIFAR-10 batch '", path, "'");
  Datum datum;
  datum.set_channels(3);
  datum.set_height(kSize);
  datum.set_width(kSize);
  std::string record(kRecordBytes, '\0');
  std::string value;
  for (int item = 0; item < kRecordsPerBatch; ++item) {
    if (!in.read(record.data(), kRecordBytes))
      CREMA_THROW_RUNTIME("'", path, "': cannot read record ", item, " (0-based) of ",
                          kRecordsPerBatch, ": the file ended or changed while being read");
    const int label = static_cast<uint8_t>(record[0]);
    if (label >= kClasses)
      CREMA_THROW_RUNTIME("'", path, "': record ", item, " (0-based, byte offset ",
                          static_cast<int64_t>(item) * kRecordBytes, ") has label ", label,
                          "; CIFAR-10 labels are 0-", kClasses - 1);
    datum.set_label(label);
    datum.set_data(record.data() + 1, kImageBytes);
    datum.SerializeToString(&value);
    char key[16];
    std::snprintf(key, sizeof(key), "%05d", first_key + item);  // Caffe's format_int(i, 5)
    txn->Put(key, value);
    if ((item + 1) % 1000 == 0) txn->Commit();
    progress->Update(first_key + item + 1);
  }
  txn->Commit();
  progress->Message(StrCat("  ", path, ": ", kRecordsPerBatch, " records -> ", shown));
}

int RunConvertCifar10(const std::vector<std::string>& args) {
  if (args.size() != 2)
    CREMA_THROW_CONFIG("convert-cifar10 takes 2 arguments (INPUT_FOLDER OUTPUT_FOLDER), got ",
                       args.size(), " (crema convert-cifar10 --help)");
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  db::GetDB(backend);  // an unavailable backend fails before any file is read
  const std::string& input = args[0];
  std::vector<std::string> batches;
  for (int b = 0; b <= kTrainBatches; ++b) {
    batches.push_back(input + "/" + BatchName(b));
    CheckBatchSize(batches.back());
  }
  // The labels are checked while converting; a bad one aborts and removes the partial DBs.
  const std::string suffix = db::BackendName(backend);
  const std::string train_name = "cifar10_train_" + suffix, test_name = "cifar10_test_" + suffix;
  StagingDir out(args[1], {train_name, test_name});

  std::printf("writing %d training records\n", kTrainBatches * kRecordsPerBatch);
  std::fflush(stdout);
  {
    auto db = db::OpenDB(backend, out.Path(train_name), db::Mode::kNew);
    auto txn = db->NewTransaction();
    ConvertProgress progress(kTrainBatches * kRecordsPerBatch, "images");
    for (int b = 0; b < kTrainBatches; ++b)
      ConvertBatch(batches[b], b * kRecordsPerBatch, out.FinalPath(train_name), txn.get(),
                   &progress);
    progress.Finish();
  }
  std::printf("writing %d test records\n", kRecordsPerBatch);
  std::fflush(stdout);
  {
    auto db = db::OpenDB(backend, out.Path(test_name), db::Mode::kNew);
    auto txn = db->NewTransaction();
    ConvertProgress progress(kRecordsPerBatch, "images");
    ConvertBatch(batches[kTrainBatches], 0, out.FinalPath(test_name), txn.get(), &progress);
    progress.Finish();
  }
  out.Commit();
  std::printf("wrote %d records to %s and %d records to %s (%s)\n",
              kTrainBatches * kRecordsPerBatch, out.FinalPath(train_name).c_str(), kRecordsPerBatch,
              out.FinalPath(test_name).c_str(), suffix.c_str());
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    convert_cifar10, "convert-cifar10",
    "convert the CIFAR-10 binary batches to train and test Datum DBs",
    "crema convert-cifar10 INPUT_FOLDER OUTPUT_FOLDER [--backend lmdb|leveldb]\n"
    "  INPUT_FOLDER: the cifar-10-batches-bin folder of cifar-10-binary.tar.gz\n"
    "  (data_batch_1.bin .. data_batch_5.bin, test_batch.bin: 10000 records of a label byte and\n"
    "  3072 bytes of R, G, B 32 x 32 planes each). Writes OUTPUT_FOLDER/cifar10_train_<backend>\n"
    "  (50000 records) and cifar10_test_<backend> (10000), byte-identical to Caffe's\n"
    "  convert_cifar10_data: keys \"%05d\", Datum 3 x 32 x 32 holding the RGB planes as stored.\n"
    "  OUTPUT_FOLDER is created when missing; the DBs must not exist. Nothing is left under\n"
    "  their names when a batch is missing, truncated or holds a label above 9.\n"
    "  data/cifar10/get_cifar10.sh runs it and compute-image-mean on the tarball.",
    {"backend", "progress"}, &crema::cli::RunConvertCifar10);
