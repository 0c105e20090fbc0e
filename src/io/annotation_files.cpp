#include "io/annotation_files.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

#include "core/closest_name.hpp"
#include "crema/error.hpp"
#include "io/input_checks.hpp"
#include "io/json.hpp"

namespace crema {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string Trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && IsSpace(s[begin])) ++begin;
  while (end > begin && IsSpace(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

// ---- XML ----

constexpr int kMaxXmlDepth = 256;

bool IsNameChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == ':' || c == '-' || c == '.' || u >= 0x80;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class XmlParser {
 public:
  XmlParser(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  XmlElement Document() {
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;  // a UTF-8 byte order mark
    SkipMisc();
    if (AtEnd()) Fail("no root element");
    if (text_[pos_] != '<') Fail("text before the root element");
    XmlElement root = Element(0);
    SkipMisc();
    if (!AtEnd()) Fail(StrCat("content after the root element </", root.name, ">"));
    return root;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  bool StartsWith(const char* s) const { return text_.compare(pos_, std::strlen(s), s) == 0; }

  // 1-based line of `offset`; offsets asked for mostly grow, so counting resumes where it stopped.
  int Line(size_t offset) {
    if (offset < counted_) {
      counted_ = 0;
      line_ = 1;
    }
    for (; counted_ < offset && counted_ < text_.size(); ++counted_)
      if (text_[counted_] == '\n') ++line_;
    return line_;
  }

  [[noreturn]] void Fail(const std::string& message) { FailAt(pos_, message); }
  [[noreturn]] void FailAt(size_t offset, const std::string& message) {
    CREMA_THROW_RUNTIME(name_, ":", Line(offset), ": malformed XML: ", message);
  }

  void SkipSpace() {
    while (!AtEnd() && IsSpace(text_[pos_])) ++pos_;
  }
  void SkipPast(const char* terminator, const char* what) {
    const size_t end = text_.find(terminator, pos_);
    if (end == std::string::npos) Fail(StrCat("unterminated ", what));
    pos_ = end + std::strlen(terminator);
  }
  // White space, the declaration, processing instructions, comments and a DOCTYPE (without an
  // internal subset) around the root element.
  void SkipMisc() {
    for (;;) {
      SkipSpace();
      if (StartsWith("<?")) {
        SkipPast("?>", "processing instruction (<?...?>)");
      } else if (StartsWith("<!--")) {
        SkipPast("-->", "comment (<!--...-->)");
      } else if (StartsWith("<!DOCTYPE")) {
        const size_t end = text_.find('>', pos_);
        if (end == std::string::npos) Fail("unterminated <!DOCTYPE");
        if (text_.find('[', pos_) < end) Fail("a DOCTYPE with an internal subset is not supported");
        pos_ = end + 1;
      } else {
        return;
      }
    }
  }

  std::string Name() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    if (start == pos_)
      Fail(AtEnd() ? "the file ends where a name was expected" : "expected a name");
    return text_.substr(start, pos_ - start);
  }

  // At '&': the entity or character reference, decoded.
  std::string Reference() {
    const size_t start = pos_;
    const size_t end = text_.find(';', pos_);
    if (end == std::string::npos || end - pos_ > 10)
      Fail("an '&' that starts no entity (a literal '&' is written &amp;)");
    const std::string ref = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    if (ref == "amp") return "&";
    if (ref == "lt") return "<";
    if (ref == "gt") return ">";
    if (ref == "quot") return "\"";
    if (ref == "apos") return "'";
    if (ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string digits = ref.substr(hex ? 2 : 1);
      char* stop = nullptr;
      const unsigned long cp = std::strtoul(digits.c_str(), &stop, hex ? 16 : 10);
      if (!digits.empty() && *stop == '\0' &&
          std::isxdigit(static_cast<unsigned char>(digits[0])) && cp > 0 && cp <= 0x10ffff) {
        std::string out;
        AppendUtf8(static_cast<uint32_t>(cp), &out);
        return out;
      }
    }
    FailAt(start, StrCat("unknown entity &", ref, ";"));
  }

  XmlElement Element(int depth) {
    if (depth >= kMaxXmlDepth) Fail(StrCat("elements nested more than ", kMaxXmlDepth, " deep"));
    XmlElement element;
    element.line = Line(pos_);
    ++pos_;  // '<'
    element.name = Name();
    for (;;) {  // attributes, ignored
      SkipSpace();
      if (AtEnd()) Fail(StrCat("the file ends inside the tag <", element.name));
      if (StartsWith("/>")) {
        pos_ += 2;
        return element;
      }
      if (text_[pos_] == '>') {
        ++pos_;
        break;
      }
      Name();
      SkipSpace();
      if (AtEnd() || text_[pos_] != '=') Fail("expected '=' after an attribute name");
      ++pos_;
      SkipSpace();
      if (AtEnd() || (text_[pos_] != '"' && text_[pos_] != '\''))
        Fail("expected a quoted attribute value");
      const size_t end = text_.find(text_[pos_], pos_ + 1);
      if (end == std::string::npos) Fail("unterminated attribute value");
      pos_ = end + 1;
    }
    for (;;) {  // content
      if (AtEnd())
        Fail(StrCat("the file ends inside <", element.name, "> (opened at line ", element.line,
                    ")"));
      const char c = text_[pos_];
      if (c == '&') {
        element.text += Reference();
      } else if (c != '<') {
        element.text.push_back(c);
        ++pos_;
      } else if (StartsWith("</")) {
        pos_ += 2;
        const size_t at = pos_;
        const std::string closing = Name();
        SkipSpace();
        if (AtEnd() || text_[pos_] != '>') Fail(StrCat("expected '>' after </", closing));
        if (closing != element.name)
          FailAt(at, StrCat("</", closing, "> closes <", element.name, "> (opened at line ",
                            element.line, ")"));
        ++pos_;
        return element;
      } else if (StartsWith("<!--")) {
        SkipPast("-->", "comment (<!--...-->)");
      } else if (StartsWith("<![CDATA[")) {
        pos_ += 9;
        const size_t end = text_.find("]]>", pos_);
        if (end == std::string::npos) Fail("unterminated <![CDATA[");
        element.text.append(text_, pos_, end - pos_);
        pos_ = end + 3;
      } else if (StartsWith("<?")) {
        SkipPast("?>", "processing instruction (<?...?>)");
      } else if (StartsWith("<!")) {
        Fail("unexpected '<!' inside an element");
      } else {
        element.children.push_back(Element(depth + 1));
      }
    }
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
  size_t counted_ = 0;
  int line_ = 1;
};

// ---- boxes ----

std::string Where(const std::string& path, int line) { return StrCat(path, ":", line); }

int LabelOf(const std::string& name, const std::map<std::string, int>& labels_by_name,
            const std::string& where) {
  const auto it = labels_by_name.find(name);
  if (it != labels_by_name.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& item : labels_by_name) names.push_back(item.first);
  // No suggestion for a number (a COCO category id): any other short number is "close".
  const bool number = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  const std::string suggestion = number ? "" : ClosestName(name, names);
  CREMA_THROW_CONFIG(where, ": class \"", name, "\" is not in the label map",
                     suggestion.empty() ? "" : StrCat("; did you mean \"", suggestion, "\"?"));
}

// The boxes of one image, by label; pixels in, normalized boxes out.
class Groups {
 public:
  explicit Groups(ImageAnnotation* annotation) : annotation_(annotation) {}

  void Add(int label, float xmin, float ymin, float xmax, float ymax, bool difficult,
           const std::string& where) {
    const float width = static_cast<float>(annotation_->width);
    const float height = static_cast<float>(annotation_->height);
    if (xmin > width || ymin > height || xmax > width || ymax > height || xmin < 0 || ymin < 0 ||
        xmax < 0 || ymax < 0)
      annotation_->warnings.push_back(StrCat(where, ": the box [", xmin, ", ", ymin, ", ", xmax,
                                             ", ", ymax, "] exceeds the image (",
                                             annotation_->width, " x ", annotation_->height, ")"));
    if (xmin > xmax || ymin > ymax)
      annotation_->warnings.push_back(StrCat(where, ": the box [", xmin, ", ", ymin, ", ", xmax,
                                             ", ", ymax, "] is inverted (min > max)"));
    AnnotationGroup& group = groups_[label];
    group.set_group_label(label);
    Annotation* annotation = group.add_annotation();
    annotation->set_instance_id(group.annotation_size() - 1);
    NormalizedBBox* box = annotation->mutable_bbox();
    box->set_xmin(xmin / width);
    box->set_ymin(ymin / height);
    box->set_xmax(xmax / width);
    box->set_ymax(ymax / height);
    box->set_difficult(difficult);
  }

  void Fill(AnnotatedDatum* datum) {
    datum->clear_annotation_group();
    for (auto& group : groups_) datum->add_annotation_group()->Swap(&group.second);
  }

 private:
  ImageAnnotation* annotation_;
  std::map<int, AnnotationGroup> groups_;  // sorted by label
};

// The size the boxes are normalized by: the file's (warning when the image's differs), else the
// image's, as SSD.
ImageAnnotation SizeFor(const std::string& path, int file_width, int file_height, int image_width,
                        int image_height) {
  ImageAnnotation result;
  result.width = file_width > 0 ? file_width : image_width;
  result.height = file_height > 0 ? file_height : image_height;
  if (result.width <= 0 || result.height <= 0)
    CREMA_THROW_RUNTIME(path, ": no image size in the file, and the image's is unknown");
  if (image_width > 0 && image_height > 0 &&
      (result.width != image_width || result.height != image_height))
    result.warnings.push_back(StrCat(path, ": the file says the image is ", result.width, " x ",
                                     result.height, " (width x height), but it is ", image_width,
                                     " x ", image_height));
  return result;
}

// A number in an element; ConfigError naming the file and line when it is not one.
double XmlNumber(const XmlElement& element, const std::string& path) {
  const std::string text = Trim(element.text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    CREMA_THROW_CONFIG(Where(path, element.line), ": <", element.name, "> must be a number, got '",
                       text, "'");
  return value;
}

const XmlElement& XmlRequired(const XmlElement& parent, const std::string& name,
                              const std::string& path) {
  const XmlElement* child = parent.Child(name);
  if (child == nullptr)
    CREMA_THROW_CONFIG(Where(path, parent.line), ": <", parent.name, "> has no <", name, ">");
  return *child;
}

int XmlSize(const XmlElement& size, const std::string& name, const std::string& path) {
  const XmlElement* child = size.Child(name);
  if (child == nullptr) return 0;
  const double value = XmlNumber(*child, path);
  if (value < 0 || value != std::floor(value) || value > 1e9)
    CREMA_THROW_CONFIG(Where(path, child->line), ": <", name, "> must be a whole number >= 0, got ",
                       Trim(child->text));
  return static_cast<int>(value);
}

// ---- JSON ----

Json ParseJsonFile(const std::string& path) {
  const std::string text = ReadWholeFile(path);
  try {
    return ParseJson(text);
  } catch (const JsonSyntaxError& e) {
    int line = 1, column = 1;
    for (size_t i = 0; i < e.offset() && i < text.size(); ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      if (text[i] == '\n') ++line;
    }
    CREMA_THROW_RUNTIME(path, ":", line, ":", column, ": malformed JSON: ", e.message());
  }
}

double JsonNumberAt(const Json& parent, const std::string& key, const std::string& where) {
  const Json* value = parent.Find(key);
  if (value == nullptr || value->type != Json::Type::kNumber || !std::isfinite(value->number))
    CREMA_THROW_CONFIG(where, ": \"", key, "\" must be a number",
                       value == nullptr ? " (it is missing)" : StrCat(", got ", value->Dump()));
  return value->number;
}

int JsonSizeAt(const Json& parent, const std::string& key, const std::string& where) {
  if (!parent.has(key)) return 0;
  const double value = JsonNumberAt(parent, key, where);
  if (value < 0 || value != std::floor(value) || value > 1e9)
    CREMA_THROW_CONFIG(where, ": \"", key, "\" must be a whole number >= 0, got ", value);
  return static_cast<int>(value);
}

// bbox [x, y, width, height] in pixels.
void JsonBox(const Json& annotation, const std::string& where, float box[4]) {
  const Json* bbox = annotation.Find("bbox");
  if (bbox == nullptr || !bbox->is_array() || bbox->size() != 4)
    CREMA_THROW_CONFIG(where, ": \"bbox\" must be [x, y, width, height]",
                       bbox == nullptr ? " (it is missing)" : StrCat(", got ", bbox->Dump()));
  for (size_t i = 0; i < 4; ++i) {
    const Json& v = (*bbox)[i];
    if (v.type != Json::Type::kNumber || !std::isfinite(v.number))
      CREMA_THROW_CONFIG(where, ": \"bbox\" must hold 4 numbers, got ", bbox->Dump());
    box[i] = static_cast<float>(v.number);
  }
}

bool JsonCrowd(const Json& annotation, const std::string& where) {
  const Json* crowd = annotation.Find("iscrowd");
  if (crowd == nullptr || crowd->type == Json::Type::kNull) return false;
  if (crowd->type == Json::Type::kBool) return crowd->boolean;
  if (crowd->type == Json::Type::kNumber) return crowd->number != 0;
  CREMA_THROW_CONFIG(where, ": \"iscrowd\" must be 0 or 1, got ", crowd->Dump());
}

// A JSON id (number or string) as text: 3 -> "3".
std::string IdText(const Json& id) {
  if (id.type == Json::Type::kString) return id.string;
  if (id.type == Json::Type::kNumber && id.number == std::floor(id.number) &&
      std::fabs(id.number) < 1e15)
    return std::to_string(static_cast<int64_t>(id.number));
  return id.Dump();
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

const XmlElement* XmlElement::Child(const std::string& child_name) const {
  for (const XmlElement& child : children)
    if (child.name == child_name) return &child;
  return nullptr;
}

XmlElement ParseXml(const std::string& text, const std::string& name) {
  return XmlParser(text, name).Document();
}

ImageAnnotation ReadVocAnnotation(const std::string& path,
                                  const std::map<std::string, int>& labels_by_name, int image_width,
                                  int image_height, AnnotatedDatum* datum) {
  const XmlElement root = ParseXml(ReadWholeFile(path), path);
  if (root.name != "annotation")
    CREMA_THROW_RUNTIME(Where(path, root.line),
                        ": not a Pascal VOC annotation: the root element is <", root.name,
                        ">, not <annotation>");
  int file_width = 0, file_height = 0;
  if (const XmlElement* size = root.Child("size")) {
    file_width = XmlSize(*size, "width", path);
    file_height = XmlSize(*size, "height", path);
  }
  ImageAnnotation result = SizeFor(path, file_width, file_height, image_width, image_height);
  Groups groups(&result);
  for (const XmlElement& object : root.children) {
    if (object.name != "object") continue;
    const XmlElement& name = XmlRequired(object, "name", path);
    const int label = LabelOf(Trim(name.text), labels_by_name, Where(path, name.line));
    bool difficult = false;
    if (const XmlElement* flag = object.Child("difficult")) {
      const std::string text = Trim(flag->text);
      if (!text.empty() && text != "0" && text != "1")
        CREMA_THROW_CONFIG(Where(path, flag->line), ": <difficult> must be 0 or 1, got '", text,
                           "'");
      difficult = text == "1";
    }
    const XmlElement& box = XmlRequired(object, "bndbox", path);
    float coordinates[4];
    const char* names[] = {"xmin", "ymin", "xmax", "ymax"};
    for (int i = 0; i < 4; ++i)
      coordinates[i] = static_cast<float>(XmlNumber(XmlRequired(box, names[i], path), path));
    groups.Add(label, coordinates[0], coordinates[1], coordinates[2], coordinates[3], difficult,
               Where(path, box.line));
  }
  groups.Fill(datum);
  return result;
}

ImageAnnotation ReadJsonAnnotation(const std::string& path,
                                   const std::map<std::string, int>& labels_by_name,
                                   int image_width, int image_height, AnnotatedDatum* datum) {
  const Json root = ParseJsonFile(path);
  if (!root.is_object()) CREMA_THROW_CONFIG(path, ": expected a JSON object");
  const Json& image = root["image"];
  const std::string image_where = StrCat(path, ": image");
  ImageAnnotation result =
      SizeFor(path, JsonSizeAt(image, "width", image_where),
              JsonSizeAt(image, "height", image_where), image_width, image_height);
  Groups groups(&result);
  const Json* annotations = root.Find("annotation");
  if (annotations != nullptr && !annotations->is_array())
    CREMA_THROW_CONFIG(path, ": \"annotation\" must be an array");
  for (size_t i = 0; annotations != nullptr && i < annotations->size(); ++i) {
    const Json& annotation = (*annotations)[i];
    const std::string where = StrCat(path, ": annotation[", i, "]");
    if (!annotation.is_object()) CREMA_THROW_CONFIG(where, ": expected an object");
    const Json* category = annotation.Find("category_id");
    if (category == nullptr) CREMA_THROW_CONFIG(where, ": \"category_id\" is missing");
    const int label = LabelOf(IdText(*category), labels_by_name, where);
    float box[4];
    JsonBox(annotation, where, box);
    groups.Add(label, box[0], box[1], box[0] + box[2], box[1] + box[3],
               JsonCrowd(annotation, where), where);
  }
  groups.Fill(datum);
  return result;
}

ImageAnnotation ReadTxtAnnotation(const std::string& path, int image_width, int image_height,
                                  AnnotatedDatum* datum) {
  ImageAnnotation result = SizeFor(path, 0, 0, image_width, image_height);
  Groups groups(&result);
  std::istringstream in(ReadWholeFile(path));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (Trim(line).empty()) continue;
    std::istringstream fields(line);
    int label = 0;
    float box[4];
    std::string extra;
    if (!(fields >> label >> box[0] >> box[1] >> box[2] >> box[3]) || (fields >> extra))
      CREMA_THROW_CONFIG(Where(path, number),
                         ": expected \"label xmin ymin xmax ymax\" (pixels), got '", Trim(line),
                         "'");
    if (label < 0) CREMA_THROW_CONFIG(Where(path, number), ": the label must be >= 0");
    groups.Add(label, box[0], box[1], box[2], box[3], false, Where(path, number));
  }
  groups.Fill(datum);
  return result;
}

// ---- COCO ----

struct CocoInstances::Data {
  struct Box {
    int label;
    float x, y, width, height;
    bool crowd;
    int index;  // in "annotations", for messages
  };
  struct Image {
    int width = 0, height = 0;
    std::vector<Box> boxes;
  };
  std::string path;
  std::vector<Image> images;
  std::map<std::string, int> by_file_name;  // file_name -> image
  std::map<std::string, int> by_base_name;  // its last component -> image; -1 when shared
  const Image* Find(const std::string& file_name) const {
    auto it = by_file_name.find(file_name);
    if (it != by_file_name.end()) return &images[it->second];
    it = by_base_name.find(BaseName(file_name));
    if (it != by_base_name.end() && it->second >= 0) return &images[it->second];
    return nullptr;
  }
};

CocoInstances::CocoInstances(const std::string& path,
                             const std::map<std::string, int>& labels_by_name)
    : data_(std::make_unique<Data>()) {
  data_->path = path;
  const Json root = ParseJsonFile(path);
  if (!root.is_object()) CREMA_THROW_CONFIG(path, ": expected a JSON object (COCO instances)");
  const auto array = [&](const char* key) -> const Json& {
    const Json& value = root[key];
    if (!value.is_array())
      CREMA_THROW_CONFIG(path, ": \"", key, "\" must be an array (a COCO instances file)");
    return value;
  };
  const Json& images = array("images");
  const Json& annotations = array("annotations");
  const Json& categories = array("categories");

  // Category id -> its name and id; resolved to a label when an annotation uses it.
  std::map<std::string, std::pair<std::string, size_t>> category_names;
  for (size_t i = 0; i < categories.size(); ++i) {
    const std::string where = StrCat(path, ": categories[", i, "]");
    const Json& category = categories[i];
    if (!category.is_object() || !category.has("id"))
      CREMA_THROW_CONFIG(where, ": expected an object with an \"id\"");
    const Json& name = category["name"];
    category_names[IdText(category["id"])] = {
        name.type == Json::Type::kString ? name.string : std::string(), i};
  }
  std::map<std::string, int> image_by_id;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string where = StrCat(path, ": images[", i, "]");
    const Json& image = images[i];
    if (!image.is_object()) CREMA_THROW_CONFIG(where, ": expected an object");
    const Json& file_name = image["file_name"];
    if (file_name.type != Json::Type::kString || !image.has("id"))
      CREMA_THROW_CONFIG(where, ": expected an \"id\" and a \"file_name\" string");
    Data::Image entry;
    entry.width = JsonSizeAt(image, "width", where);
    entry.height = JsonSizeAt(image, "height", where);
    const int index = static_cast<int>(data_->images.size());
    if (!image_by_id.emplace(IdText(image["id"]), index).second)
      CREMA_THROW_CONFIG(where, ": image id ", IdText(image["id"]), " is listed twice");
    data_->images.push_back(entry);
    data_->by_file_name.emplace(file_name.string, index);
    const auto base = data_->by_base_name.emplace(BaseName(file_name.string), index);
    if (!base.second) base.first->second = -1;
  }
  std::map<std::string, int> label_by_category;
  for (size_t i = 0; i < annotations.size(); ++i) {
    const std::string where = StrCat(path, ": annotations[", i, "]");
    const Json& annotation = annotations[i];
    if (!annotation.is_object()) CREMA_THROW_CONFIG(where, ": expected an object");
    const auto image = image_by_id.find(IdText(annotation["image_id"]));
    if (image == image_by_id.end())
      CREMA_THROW_CONFIG(where, ": image_id ", annotation["image_id"].Dump(),
                         " is not in \"images\"");
    const std::string category_id = IdText(annotation["category_id"]);
    auto label = label_by_category.find(category_id);
    if (label == label_by_category.end()) {
      const auto category = category_names.find(category_id);
      if (category == category_names.end())
        CREMA_THROW_CONFIG(where, ": category_id ", category_id, " is not in \"categories\"");
      const std::string& name = category->second.first;
      const std::string category_where =
          StrCat(path, ": categories[", category->second.second, "] (id ", category_id, ")");
      // By name, else by id (SSD's COCO label map names classes by id).
      int value;
      if (labels_by_name.count(name) != 0)
        value = labels_by_name.at(name);
      else if (labels_by_name.count(category_id) != 0)
        value = labels_by_name.at(category_id);
      else
        value = LabelOf(name.empty() ? category_id : name, labels_by_name, category_where);
      label = label_by_category.emplace(category_id, value).first;
    }
    float box[4];
    JsonBox(annotation, where, box);
    data_->images[image->second].boxes.push_back({label->second, box[0], box[1], box[2], box[3],
                                                  JsonCrowd(annotation, where),
                                                  static_cast<int>(i)});
  }
}

CocoInstances::~CocoInstances() = default;

bool CocoInstances::Has(const std::string& file_name) const {
  return data_->Find(file_name) != nullptr;
}

size_t CocoInstances::num_images() const { return data_->images.size(); }

ImageAnnotation CocoInstances::Annotate(const std::string& file_name, int image_width,
                                        int image_height, AnnotatedDatum* datum) const {
  const Data::Image* image = data_->Find(file_name);
  if (image == nullptr)
    CREMA_THROW_RUNTIME(data_->path, " lists no image \"", file_name, "\" (nor \"",
                        BaseName(file_name), "\")");
  ImageAnnotation result = SizeFor(StrCat(data_->path, ": image \"", file_name, "\""), image->width,
                                   image->height, image_width, image_height);
  Groups groups(&result);
  for (const Data::Box& box : image->boxes)
    groups.Add(box.label, box.x, box.y, box.x + box.width, box.y + box.height, box.crowd,
               StrCat(data_->path, ": annotations[", box.index, "]"));
  groups.Fill(datum);
  return result;
}

}  // namespace crema
