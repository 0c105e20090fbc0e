#pragma once
// One image's boxes from the annotation files of detection datasets, as SSD's convert_annoset
// reads them (ReadXMLToAnnotatedDatum and its siblings): boxes in pixels become boxes normalized
// by the image size (x / width, y / height), class names become labels through a label map, and
// the boxes of one class form one AnnotationGroup (groups sorted by label; instance ids 0, 1, ...
// within a group, in file order).
//
// Formats:
//   VOC   Pascal VOC XML: <annotation><size><width/><height/></size> and per object <name/>,
//         <difficult/> (0, 1 or empty) and <bndbox><xmin/><ymin/><xmax/><ymax/></bndbox>
//         (decimals accepted, where SSD's reader silently took 0 for them). Read by a
//         small strict reader of the element-only XML these files are (declaration, comments,
//         CDATA, attributes (ignored), the five named entities and character references).
//   JSON  SSD's per-image JSON: {"image": {"width", "height"}, "annotation": [{"bbox": [x, y, w,
//         h], "category_id", "iscrowd"}]}; category_id (as text) is the class name.
//   TXT   SSD's text boxes: one "label xmin ymin xmax ymax" per line (labels already numbers).
//   COCO  a whole instances file (CocoInstances): images, annotations (bbox [x, y, w, h],
//         iscrowd), categories; a category is found in the label map by its name, else by its id
//         (SSD's labelmap_coco.prototxt names classes by id).
// Difficult (VOC) or crowd (COCO, JSON) boxes keep the flag in NormalizedBBox.difficult.
//
// Errors: malformed files -> RuntimeError "file:line: ..." (JSON: "file:line:col: ..."); a class
// missing from the label map or a bad value -> ConfigError naming the file, line and class.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crema/proto.hpp"

namespace crema {

// What an annotation file says about its image besides the boxes.
struct ImageAnnotation {
  int width = 0, height = 0;  // the size the boxes were normalized by
  // "file: ..." for what SSD warns about: a size differing from the image's, boxes outside the
  // image or inverted.
  std::vector<std::string> warnings;
};

// `image_width`/`image_height`: the size of the decoded image (0 when unknown). A VOC or JSON file
// without a size uses it; one with a different size gets a warning (its own size is used, as
// SSD). Fills datum->annotation_group (replacing any) and returns the size used.
ImageAnnotation ReadVocAnnotation(const std::string& path,
                                  const std::map<std::string, int>& labels_by_name, int image_width,
                                  int image_height, AnnotatedDatum* datum);
ImageAnnotation ReadJsonAnnotation(const std::string& path,
                                   const std::map<std::string, int>& labels_by_name,
                                   int image_width, int image_height, AnnotatedDatum* datum);
// TXT files carry no size: the image's is required.
ImageAnnotation ReadTxtAnnotation(const std::string& path, int image_width, int image_height,
                                  AnnotatedDatum* datum);

// A COCO instances file, read once; images are then looked up by file name.
class CocoInstances {
 public:
  // Parses `path` and resolves every category to a label (ConfigError for a category used by an
  // annotation but missing from the label map).
  CocoInstances(const std::string& path, const std::map<std::string, int>& labels_by_name);
  ~CocoInstances();
  CocoInstances(const CocoInstances&) = delete;
  CocoInstances& operator=(const CocoInstances&) = delete;
  // Whether an image of that file name (or of its last path component) is listed.
  bool Has(const std::string& file_name) const;
  // Fills datum->annotation_group with the image's boxes (none is fine: an image without
  // objects); RuntimeError naming the file when the image is not listed.
  ImageAnnotation Annotate(const std::string& file_name, int image_width, int image_height,
                           AnnotatedDatum* datum) const;
  size_t num_images() const;

 private:
  struct Data;
  std::unique_ptr<Data> data_;
};

// ---- the XML reader, for VOC files and their tests ----

struct XmlElement {
  std::string name;
  int line = 0;      // 1-based line of the start tag
  std::string text;  // character data directly inside, entities decoded, concatenated
  std::vector<XmlElement> children;
  // The first child of that name, or null.
  const XmlElement* Child(const std::string& child_name) const;
};

// Parses a document with one root element; RuntimeError "name:line: ..." when malformed (also
// for nesting deeper than 256 elements). `name` is used in messages.
XmlElement ParseXml(const std::string& text, const std::string& name);

}  // namespace crema
