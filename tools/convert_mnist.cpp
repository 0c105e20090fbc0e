// crema convert-mnist IMAGES LABELS DB: Caffe's convert_mnist_data (see src/io/mnist.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "flags.hpp"
#include "io/db.hpp"
#include "io/mnist.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

int RunConvertMnist(const std::vector<std::string>& args) {
  if (args.size() != 3)
    CREMA_THROW_CONFIG("convert-mnist takes 3 arguments (IMAGES LABELS DB), got ", args.size(),
                       " (crema convert-mnist --help)");
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  const int64_t count = ConvertMnist(args[0], args[1], args[2], backend);
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
                    {"backend"}, &crema::cli::RunConvertMnist);
