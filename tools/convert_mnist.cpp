// crema convert-mnist IMAGES LABELS DB: Caffe's convert_mnist_data (see src/io/mnist.hpp).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "flags.hpp"
#include "io/db.hpp"
#include "io/mnist.hpp"
#include "progress.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

int RunConvertMnist(const std::vector<std::string>& args) {
  if (args.size() != 3)
    CREMA_THROW_CONFIG("convert-mnist takes 3 arguments (IMAGES LABELS DB), got ", args.size(),
                       " (crema convert-mnist --help)");
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  // On a terminal a live count of the records; elsewhere only the log lines, as before.
  std::unique_ptr<ConvertProgress> progress;
  std::function<void(int64_t, int64_t)> report;
  if (LiveProgress())
    report = [&progress](int64_t done, int64_t total) {
      if (!progress) progress = std::make_unique<ConvertProgress>(total, "images");
      progress->Update(done);
      if (done == total) progress->Finish();  // before ConvertMnist's closing log line
    };
  const int64_t count = ConvertMnist(args[0], args[1], args[2], backend, report);
  if (progress) progress->Finish();
  std::printf("wrote %lld records to %s (%s)\n", static_cast<long long>(count), args[2].c_str(),
              db::BackendName(backend));
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(convert_mnist, "convert-mnist",
                    "convert MNIST-format idx files (plain or .gz) to a Datum DB",
                    "crema convert-mnist IMAGES LABELS DB [--backend lmdb]\n"
                    "  IMAGES, LABELS: idx files (e.g. train-images-idx3-ubyte[.gz]);\n"
                    "  DB: the folder to create (must not exist). Records are byte-identical to "
                    "Caffe's convert_mnist_data.",
                    {"backend", "progress"}, &crema::cli::RunConvertMnist);
