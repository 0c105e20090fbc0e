// crema convert-annoset ROOTFOLDER LISTFILE DB_NAME: SSD's convert_annoset. Each line of LISTFILE
// is "image annotation" (--anno_type detection; --label_type xml, json or txt) or "image label"
// (classification); with --coco=instances.json, just "image", its boxes found in the COCO file by
// file name. Images are decoded as by convert-imageset (plus SSD's --min_dim/--max_dim), boxes
// are normalized by the image size (src/io/annotation_files.hpp), and each image becomes an
// AnnotatedDatum (type BBOX, groups sorted by label) under the key "%08d_%s" (line index, image
// path). Unreadable images are reported and skipped; a bad annotation stops the conversion, and
// the DB is then not left behind (it is written under a temporary name, renamed at the end).
#include <gflags/gflags.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "image_datum.hpp"
#include "io/annotation_files.hpp"
#include "io/db.hpp"
#include "io/input_checks.hpp"
#include "io/label_map.hpp"
#include "progress.hpp"
#include "verb.hpp"

DEFINE_string(anno_type, "detection",
              "detection (lines \"image annotation\") or classification (lines \"image label\").");
DEFINE_string(label_type, "xml",
              "The annotation files' format: xml (Pascal VOC), json (SSD's per-image JSON) or txt "
              "(\"label xmin ymin xmax ymax\" lines).");
DEFINE_string(label_map_file, "", "The LabelMap prototxt mapping class names to labels.");
DEFINE_string(
    coco, "",
    "A COCO instances JSON holding every image's boxes; LISTFILE then lists images only.");
DEFINE_bool(check_label, false, "Accepted for SSD's scripts: the label map is always checked.");
DEFINE_int32(min_dim, 0, "Scale images up so that their short side is at least this (0: off).");
DEFINE_int32(max_dim, 0, "Scale images down so that their long side is at most this (0: off).");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

struct ListLine {
  int number;              // in the list file, 1-based
  std::string image;       // relative to ROOTFOLDER
  std::string annotation;  // relative to ROOTFOLDER (detection without --coco)
  int label = -1;          // classification
};

std::vector<ListLine> ReadList(const std::string& list, bool classification, bool coco) {
  std::ifstream in(list);
  if (!in) CREMA_THROW_RUNTIME("cannot open the list file '", list, "'");
  std::vector<ListLine> lines;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    text = text.substr(first, text.find_last_not_of(" \t") + 1 - first);
    ListLine line{number, text, "", -1};
    if (classification) {
      if (!SplitPathLabel(text, &line.image, &line.label))
        CREMA_THROW_CONFIG(list, ":", number,
                           ": expected \"image label\" (an integer label after the last space), "
                           "got '",
                           text, "'");
    } else if (!coco) {
      const size_t space = text.find_last_of(" \t");
      if (space == std::string::npos)
        CREMA_THROW_CONFIG(list, ":", number,
                           ": expected \"image annotation\" (two paths, relative to ROOTFOLDER), "
                           "got '",
                           text, "'");
      line.image = text.substr(0, text.find_last_not_of(" \t", space) + 1);
      line.annotation = text.substr(space + 1);
    }
    lines.push_back(std::move(line));
  }
  if (lines.empty()) CREMA_THROW_RUNTIME("the list file '", list, "' lists no images");
  return lines;
}

// Errors of one list line, prefixed with "LISTFILE:N: " and kept of their kind.
template <typename F>
void ForLine(const std::string& where, F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    throw ConfigError(StrCat(where, ": ", e.what()));
  } catch (const RuntimeError& e) {
    throw RuntimeError(StrCat(where, ": ", e.what()));
  }
}

struct Options {
  std::string root_folder, list, db_name;
  bool classification = false;
  std::string label_type;
  std::map<std::string, int> labels_by_name;
  std::unique_ptr<CocoInstances> coco;
  ImageToDatum image;
  db::Backend backend = db::Backend::kLmdb;
};

// Writes the records into `path` (a new DB); returns the number written.
int64_t Convert(const Options& options, std::vector<ListLine> lines, const std::string& path) {
  auto db = db::OpenDB(options.backend, path, db::Mode::kNew);
  AnnotatedDatum anno_datum;
  int64_t skipped = 0;
  ConvertProgress progress(static_cast<int64_t>(lines.size()), "images");
  auto writer = std::make_unique<DatumWriter>(db.get(), &progress);
  for (size_t line_id = 0; line_id < lines.size(); ++line_id) {
    progress.Update(static_cast<int64_t>(line_id));
    const ListLine& line = lines[line_id];
    const std::string where = StrCat(options.list, ":", line.number);
    const std::string image_path = ListedPath(options.root_folder, line.image, where);
    ImageToDatum image_options = options.image;
    if (image_options.encoding.empty() && FLAGS_encoded) {
      image_options.encoding = Extension(line.image);
      if (image_options.encoding.empty()) {
        progress.Message(StrCat("warning: skipping '", image_path,
                                "': cannot guess its encoding from the name (give --encode_type)"),
                         stderr);
        ++skipped;
        continue;
      }
    }
    anno_datum.Clear();
    std::string why;
    int height = 0, width = 0;
    if (!ReadImageToDatum(image_path, line.label, image_options, anno_datum.mutable_datum(), &why,
                          &height, &width)) {
      progress.Message(StrCat("warning: skipping '", image_path, "' (", where, "): ", why), stderr);
      ++skipped;
      continue;
    }
    if (!options.classification) {
      ImageAnnotation annotation;
      const std::string file =
          options.coco != nullptr
              ? ""
              : ListedPath(options.root_folder, line.annotation, where + " (annotation)");
      ForLine(where, [&] {
        if (options.coco != nullptr) {
          annotation = options.coco->Annotate(line.image, width, height, &anno_datum);
          return;
        }
        if (options.label_type == "xml")
          annotation = ReadVocAnnotation(file, options.labels_by_name, width, height, &anno_datum);
        else if (options.label_type == "json")
          annotation = ReadJsonAnnotation(file, options.labels_by_name, width, height, &anno_datum);
        else
          annotation = ReadTxtAnnotation(file, width, height, &anno_datum);
      });
      for (const std::string& warning : annotation.warnings)
        progress.Message("warning: " + warning, stderr);
      anno_datum.set_type(AnnotatedDatum::BBOX);
    }
    writer->CheckSize(anno_datum.datum(), image_path);
    writer->Put(line_id, line.image, anno_datum.SerializeAsString());
  }
  writer->Finish();
  const int64_t count = writer->count();
  writer.reset();  // its transaction ends before the DB closes
  db->Close();
  progress.Update(static_cast<int64_t>(lines.size()));
  progress.Finish();
  if (skipped > 0)
    std::printf("skipped %lld images that could not be read\n", static_cast<long long>(skipped));
  return count;
}

int RunConvertAnnoset(const std::vector<std::string>& args) {
  if (args.size() != 3)
    CREMA_THROW_CONFIG("convert-annoset takes 3 arguments (ROOTFOLDER LISTFILE DB_NAME), got ",
                       args.size(), " (crema convert-annoset --help)");
  if (FLAGS_resize_width < 0 || FLAGS_resize_height < 0 || FLAGS_min_dim < 0 || FLAGS_max_dim < 0)
    CREMA_THROW_CONFIG("--resize_width, --resize_height, --min_dim and --max_dim must be >= 0");
  if (FLAGS_anno_type != "detection" && FLAGS_anno_type != "classification")
    CREMA_THROW_CONFIG("--anno_type must be detection or classification, got '", FLAGS_anno_type,
                       "'");
  if (FLAGS_label_type != "xml" && FLAGS_label_type != "json" && FLAGS_label_type != "txt")
    CREMA_THROW_CONFIG("--label_type must be xml, json or txt, got '", FLAGS_label_type, "'");
  Options options;
  options.root_folder = args[0];
  options.list = args[1];
  options.db_name = args[2];
  options.classification = FLAGS_anno_type == "classification";
  options.label_type = FLAGS_label_type;
  if (options.classification && !FLAGS_coco.empty())
    CREMA_THROW_CONFIG("--coco needs --anno_type detection");
  options.backend = db::ParseBackend(FLAGS_backend);
  const bool needs_label_map =
      !options.classification && (!FLAGS_coco.empty() || options.label_type != "txt");
  if (needs_label_map) {
    RequireFlag("label_map_file", FLAGS_label_map_file);
    options.labels_by_name = LabelsByName(ReadLabelMap(FLAGS_label_map_file));
  }
#ifndef CREMA_WITH_OPENCV
  CREMA_THROW_RUNTIME("convert-annoset needs OpenCV, and this crema was built without it");
#endif
  std::error_code error;
  if (fs::exists(options.db_name, error))
    CREMA_THROW_RUNTIME("the DB '", options.db_name, "' already exists");
  std::vector<ListLine> lines = ReadList(options.list, options.classification, !FLAGS_coco.empty());
  if (!FLAGS_coco.empty())
    options.coco = std::make_unique<CocoInstances>(FLAGS_coco, options.labels_by_name);
  options.image.height = FLAGS_resize_height;
  options.image.width = FLAGS_resize_width;
  options.image.min_dim = FLAGS_min_dim;
  options.image.max_dim = FLAGS_max_dim;
  options.image.is_color = !FLAGS_gray;
  options.image.encoding = FLAGS_encode_type;
  options.image.encoded_size = true;  // as SSD's EncodeCVMatToDatum
  if (!FLAGS_encoded && !FLAGS_encode_type.empty())
    std::printf("--encode_type given: storing encoded images (--encoded)\n");
  ShuffleAndCount(&lines);

  // Written under a temporary name beside DB_NAME, renamed when complete.
  const std::string temp = StrCat(options.db_name, ".incomplete-", ::getpid());
  int64_t count = 0;
  try {
    count = Convert(options, std::move(lines), temp);
    fs::rename(temp, options.db_name);
  } catch (...) {
    fs::remove_all(temp, error);
    throw;
  }
  std::printf("wrote %lld records to %s (%s)\n", static_cast<long long>(count),
              options.db_name.c_str(), db::BackendName(options.backend));
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    convert_annoset, "convert-annoset",
    "convert images and their boxes to an AnnotatedDatum DB (SSD's convert_annoset)",
    "crema convert-annoset ROOTFOLDER LISTFILE DB_NAME --label_map_file labelmap.prototxt\n"
    "    [--anno_type detection|classification] [--label_type xml|json|txt] [--coco FILE]\n"
    "    [--gray] [--shuffle] [--backend lmdb] [--resize_width W --resize_height H]\n"
    "    [--min_dim A] [--max_dim B] [--check_size] [--encoded] [--encode_type jpg]\n"
    "  LISTFILE: one \"image annotation\" per line (e.g. JPEGImages/1.jpg Annotations/1.xml), "
    "both\n"
    "  relative to ROOTFOLDER (end it with '/'); Pascal VOC XML files with --label_type xml (the\n"
    "  default), SSD's per-image JSON with json, \"label xmin ymin xmax ymax\" lines with txt.\n"
    "  --coco instances.json: LISTFILE lists images only, found in the COCO file by file name.\n"
    "  --anno_type classification: \"image label\" lines, as convert-imageset. Class names are\n"
    "  mapped to labels by --label_map_file (a LabelMap prototxt). Records: key \"%08d_image\"\n"
    "  (line index), an AnnotatedDatum (type BBOX; boxes normalized by the image size, one group\n"
    "  per label, sorted) holding a Datum of raw C x H x W uint8 BGR pixels, or the encoded image\n"
    "  with --encoded. --min_dim/--max_dim scale keeping the aspect ratio (before --resize_*).\n"
    "  Unreadable images are reported and skipped; a bad annotation file or a class missing from\n"
    "  the label map stops the conversion, naming the list line, and leaves no DB. DB_NAME: the\n"
    "  folder to create (must not exist).",
    {"backend", "gray", "shuffle", "resize_width", "resize_height", "min_dim", "max_dim",
     "check_size", "encoded", "encode_type", "anno_type", "label_type", "label_map_file", "coco",
     "check_label", "progress"},
    &crema::cli::RunConvertAnnoset);
