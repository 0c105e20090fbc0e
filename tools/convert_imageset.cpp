// crema convert-imageset ROOTFOLDER LISTFILE DB_NAME: Caffe's convert_imageset. Each line of
// LISTFILE is "path label" (the label after the last space); ROOTFOLDER + path is decoded with
// OpenCV (BGR, or gray with --gray), resized with --resize_width/--resize_height (both > 0), and
// stored as a Datum under the key "%08d_%s" (line index, path), exactly as Caffe writes it: raw
// C x H x W uint8 pixels, or with --encoded the image file itself (when it needs no conversion)
// or its re-encoding in --encode_type (else the file's extension). Images that can't be read
// are reported with their path and skipped; their line index is not reused.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "image_datum.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "progress.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

std::vector<std::pair<std::string, int>> ReadList(const std::string& list) {
  std::ifstream in(list);
  if (!in) CREMA_THROW_RUNTIME("cannot open the list file '", list, "'");
  std::vector<std::pair<std::string, int>> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string path;
    int label = 0;
    if (!SplitPathLabel(line, &path, &label))
      CREMA_THROW_CONFIG(list, ":", number,
                         ": expected \"path label\" (an integer label after the "
                         "last space), got '",
                         line, "'");
    lines.emplace_back(path, label);
  }
  if (lines.empty()) CREMA_THROW_RUNTIME("the list file '", list, "' lists no images");
  return lines;
}

int RunConvertImageset(const std::vector<std::string>& args) {
  if (args.size() != 3)
    CREMA_THROW_CONFIG("convert-imageset takes 3 arguments (ROOTFOLDER LISTFILE DB_NAME), got ",
                       args.size(), " (crema convert-imageset --help)");
  if (FLAGS_resize_width < 0 || FLAGS_resize_height < 0)
    CREMA_THROW_CONFIG("--resize_width and --resize_height must be >= 0");
#ifndef CREMA_WITH_OPENCV
  CREMA_THROW_RUNTIME("convert-imageset needs OpenCV, and this crema was built without it");
#else
  const std::string& root_folder = args[0];
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  const bool is_color = !FLAGS_gray;
  const bool encoded = FLAGS_encoded || !FLAGS_encode_type.empty();
  if (!FLAGS_encoded && !FLAGS_encode_type.empty())
    std::printf("--encode_type given: storing encoded images (--encoded)\n");
  // As Caffe: resized only when both sizes are given; an encoded file is stored as is only when
  // neither is.
  const int height = FLAGS_resize_height, width = FLAGS_resize_width;

  std::vector<std::pair<std::string, int>> lines = ReadList(args[1]);
  ShuffleAndCount(&lines);

  auto db = db::OpenDB(backend, args[2], db::Mode::kNew);
  Datum datum;
  int64_t skipped = 0;
  // On a terminal a live count replaces the "processed N files" lines.
  ConvertProgress progress(static_cast<int64_t>(lines.size()), "images");
  DatumWriter writer(db.get(), &progress);
  for (size_t line_id = 0; line_id < lines.size(); ++line_id) {
    progress.Update(static_cast<int64_t>(line_id));
    const std::string& name = lines[line_id].first;
    const std::string path = root_folder + name;
    std::string encoding = FLAGS_encode_type;
    if (encoded && encoding.empty()) {
      encoding = Extension(name);
      if (encoding.empty()) {
        progress.Message(StrCat("warning: skipping '", path,
                                "': cannot guess its encoding from the name (give --encode_type)"),
                         stderr);
        ++skipped;
        continue;
      }
    }
    ImageToDatum options;
    options.height = height;
    options.width = width;
    options.is_color = is_color;
    options.encoding = encoding;
    std::string why;
    if (!ReadImageToDatum(path, lines[line_id].second, options, &datum, &why)) {
      progress.Message(StrCat("warning: skipping '", path, "' (line ", line_id + 1,
                              " of the list as read): ", why),
                       stderr);
      ++skipped;
      continue;
    }
    writer.CheckSize(datum, path);
    writer.Put(line_id, name, datum.SerializeAsString());
  }
  writer.Finish();
  progress.Update(static_cast<int64_t>(lines.size()));
  progress.Finish();
  std::printf("wrote %lld records to %s (%s)", static_cast<long long>(writer.count()),
              args[2].c_str(), db::BackendName(backend));
  if (skipped > 0)
    std::printf("; skipped %lld images that could not be read", static_cast<long long>(skipped));
  std::printf("\n");
  return 0;
#endif
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    convert_imageset, "convert-imageset",
    "convert a list of images to a Datum DB (Caffe's convert_imageset)",
    "crema convert-imageset ROOTFOLDER LISTFILE DB_NAME [--gray] [--shuffle] [--backend lmdb]\n"
    "    [--resize_width W --resize_height H] [--check_size] [--encoded] [--encode_type png]\n"
    "  LISTFILE: one \"path label\" per line (e.g. cat/1.jpg 3); ROOTFOLDER is prepended to each\n"
    "  path (end it with '/'). DB_NAME: the folder to create (must not exist). Records are\n"
    "  Caffe's: key \"%08d_path\" (line index), a Datum of raw C x H x W uint8 BGR pixels, or the\n"
    "  encoded image with --encoded. Unreadable images are reported and skipped. On a terminal\n"
    "  (--progress auto) a live line shows the count, images/s and ETA.",
    {"backend", "gray", "shuffle", "resize_width", "resize_height", "check_size", "encoded",
     "encode_type", "progress"},
    &crema::cli::RunConvertImageset);
