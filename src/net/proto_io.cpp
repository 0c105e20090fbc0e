// Prototxt and binary proto I/O. Text parsing records field positions (ParseInfoTree) so later
// errors can point at file:line:col; syntax errors and unknown names become one-line ConfigErrors
// with 1-based positions and, for a misspelt name, the closest valid one.
#include "crema/proto_io.hpp"

#include <fcntl.h>
#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/closest_name.hpp"
#include "crema/error.hpp"
#include "io/input_checks.hpp"
#include "net/upgrade.hpp"

namespace crema {
namespace {

namespace pb = google::protobuf;

std::string ErrnoText(int error) { return std::strerror(error); }

// Nesting deeper than this in a text or binary proto is refused with an error naming the file
// (protobuf's parsers recurse once per level; the text parser has no limit of its own). Caffe's
// schema nests a few levels; ONNX graphs inside attributes nest one level per subgraph.
constexpr int kMaxNesting = 100;

void CollectMessages(const pb::Descriptor* descriptor, std::set<const pb::Descriptor*>* seen) {
  if (descriptor == nullptr || !seen->insert(descriptor).second) return;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    CollectMessages(descriptor->field(i)->message_type(), seen);
  }
}

// Text between `prefix` and the next '"' in `message`, or "".
std::string QuotedAfter(const std::string& message, const std::string& prefix) {
  const size_t start = message.find(prefix);
  if (start == std::string::npos) return "";
  const size_t begin = start + prefix.size();
  const size_t end = message.find('"', begin);
  if (end == std::string::npos) return "";
  return message.substr(begin, end - begin);
}

// Rewrites protobuf's messages for unknown fields and enum values into crema's wording with a
// suggestion drawn from the message type being parsed (for fields) or from the enums of fields
// of that name reachable from the root (for enum values).
std::string Explain(const std::string& message, const pb::Descriptor* root) {
  if (message.find("recursion limit") != std::string::npos)
    return StrCat("messages nested more than ", kMaxNesting, " levels deep");
  const std::string unknown_field = QuotedAfter(message, "has no field named \"");
  if (!unknown_field.empty()) {
    const std::string type_name = QuotedAfter(message, "Message type \"");
    const pb::Descriptor* type = root->file()->pool()->FindMessageTypeByName(type_name);
    std::set<std::string> names;
    if (type != nullptr) {
      for (int i = 0; i < type->field_count(); ++i) names.insert(type->field(i)->name());
    } else {
      std::set<const pb::Descriptor*> all;
      CollectMessages(root, &all);
      for (const pb::Descriptor* d : all) {
        for (int i = 0; i < d->field_count(); ++i) names.insert(d->field(i)->name());
      }
    }
    std::string text = StrCat("unknown field \"", unknown_field, "\"");
    if (type != nullptr) text += StrCat(" in ", type->name());
    const std::string suggestion = ClosestName(unknown_field, names);
    if (!suggestion.empty()) text += StrCat("; did you mean \"", suggestion, "\"?");
    return text;
  }
  const std::string unknown_value = QuotedAfter(message, "Unknown enumeration value of \"");
  if (!unknown_value.empty()) {
    const std::string field_name = QuotedAfter(message, "for field \"");
    std::set<const pb::Descriptor*> all;
    CollectMessages(root, &all);
    std::set<std::string> values;
    for (const pb::Descriptor* d : all) {
      const pb::FieldDescriptor* field = d->FindFieldByName(field_name);
      if (field == nullptr || field->enum_type() == nullptr) continue;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        values.insert(field->enum_type()->value(i)->name());
      }
    }
    std::string text =
        StrCat("unknown value \"", unknown_value, "\" for field \"", field_name, "\"");
    const std::string suggestion = ClosestName(unknown_value, values);
    if (!suggestion.empty()) text += StrCat("; did you mean \"", suggestion, "\"?");
    return text;
  }
  return message;
}

// Keeps the first error only: later ones are usually consequences of it.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int line, pb::io::ColumnNumber column, const std::string& message) override {
    warnings_.push_back(StrCat(line + 1, ":", column + 1, ": ", message));
    raw_warnings_.push_back({line, column, message});
  }
  struct Raw {
    int line, column;
    std::string message;
  };
  const std::vector<Raw>& raw_warnings() const { return raw_warnings_; }

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
  std::vector<std::string> warnings_;
  std::vector<Raw> raw_warnings_;
};

// Protobuf's tokenizer counts columns from 0 with tabs advancing to the next multiple of 8;
// these convert between its (line, column) and byte offsets in the text.
constexpr int kTabWidth = 8;

size_t OffsetOf(const std::string& text, int line, int column) {
  size_t offset = 0;
  for (int l = 0; l < line && offset < text.size(); ++l) {
    const size_t newline = text.find('\n', offset);
    if (newline == std::string::npos) return text.size();
    offset = newline + 1;
  }
  for (int c = 0; c < column && offset < text.size() && text[offset] != '\n'; ++offset) {
    c += text[offset] == '\t' ? kTabWidth - c % kTabWidth : 1;
  }
  return offset;
}

void PositionOf(const std::string& text, size_t offset, int* line, int* column) {
  *line = 0;
  *column = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 0;
    } else {
      *column += text[i] == '\t' ? kTabWidth - *column % kTabWidth : 1;
    }
  }
}

// One component of a field path: "layer[3]" -> {"layer", 3}; no index -> -1.
struct PathPart {
  std::string name;
  int index = -1;
};

bool SplitFieldPath(const std::string& path, std::vector<PathPart>* parts) {
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('.', begin);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(begin, end - begin);
    PathPart parsed;
    const size_t bracket = part.find('[');
    if (bracket == std::string::npos) {
      parsed.name = part;
    } else {
      if (part.back() != ']') return false;
      parsed.name = part.substr(0, bracket);
      const std::string digits = part.substr(bracket + 1, part.size() - bracket - 2);
      if (digits.empty() || digits.size() > 9 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
      }
      parsed.index = std::stoi(digits);
    }
    if (parsed.name.empty()) return false;
    parts->push_back(parsed);
    begin = end + 1;
  }
  return !parts->empty();
}

bool Located(const pb::TextFormat::ParseLocation& location) { return location.line >= 0; }

std::string Format(const std::string& path, const pb::TextFormat::ParseLocation& location) {
  return StrCat(path, ":", location.line + 1, ":", location.column + 1);
}

}  // namespace

std::string ProtoSource::Locate(const pb::Message& root, const std::string& field_path) const {
  std::vector<PathPart> parts;
  if (tree_ == nullptr || !SplitFieldPath(field_path, &parts)) return path_;
  const pb::Descriptor* descriptor = root.GetDescriptor();
  const pb::TextFormat::ParseInfoTree* tree = tree_.get();
  pb::TextFormat::ParseLocation best;
  size_t first = 0;

  // A legacy net was parsed from `layers` (V0/V1) and maybe `input` fields, but `root` is
  // usually the upgraded net, whose `layer[i]` then maps back to the text: the Input layer made
  // from `input` fields is layer[0], and the rest are the text's `layers[i - 1]` or `layer[i-1]`.
  // (Best effort: V0 padding layers folded away shift later indices further.)
  const auto* net = dynamic_cast<const NetParameter*>(&root);
  if (net != nullptr && parts[0].name == "layer" && parts[0].index >= 0) {
    const pb::FieldDescriptor* layer_field = descriptor->FindFieldByName("layer");
    const pb::FieldDescriptor* layers_field = descriptor->FindFieldByName("layers");
    const pb::FieldDescriptor* input_field = descriptor->FindFieldByName("input");
    int index = parts[0].index;
    const pb::TextFormat::ParseLocation input_location = tree->GetLocation(input_field, 0);
    const bool input_upgraded = Located(input_location) && net->input_size() == 0 &&
                                net->layer_size() > 0 && net->layer(0).type() == "Input" &&
                                net->layer(0).name() == "input";
    if (input_upgraded) {
      if (index == 0) return Format(path_, input_location);
      --index;
    }
    const bool from_v1 = net->layers_size() == 0 && !Located(tree->GetLocation(layer_field, 0)) &&
                         Located(tree->GetLocation(layers_field, 0));
    if (input_upgraded || from_v1) {
      const pb::FieldDescriptor* field = from_v1 ? layers_field : layer_field;
      best = tree->GetLocation(field, index);
      if (!Located(best)) return path_;
      tree = tree->GetTreeForNested(field, index);
      descriptor = field->message_type();
      first = 1;
    }
  }

  for (size_t i = first; i < parts.size() && tree != nullptr && descriptor != nullptr; ++i) {
    const pb::FieldDescriptor* field = descriptor->FindFieldByName(parts[i].name);
    if (field == nullptr) break;
    int index = -1;
    if (field->is_repeated()) {
      index = parts[i].index >= 0 ? parts[i].index : 0;
    } else if (parts[i].index > 0) {
      break;  // an index on a singular field: not a path into this message
    }
    const pb::TextFormat::ParseLocation location = tree->GetLocation(field, index);
    if (!Located(location)) break;
    best = location;
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) break;
    tree = tree->GetTreeForNested(field, index);
    descriptor = field->message_type();
  }
  return Located(best) ? Format(path_, best) : path_;
}

namespace {

// The blocks ("layer {", "shape <") still open where the text ends, outermost first, and the
// position of its end (0-based, as protobuf's parser reports it).
struct OpenBlock {
  std::string opener;  // e.g. "layer {"
  int line, column;
};
std::vector<OpenBlock> BlocksOpenAtEnd(const std::string& text, int* end_line, int* end_column) {
  class Quiet : public pb::io::ErrorCollector {
   public:
    void AddError(int, pb::io::ColumnNumber, const std::string&) override {}
  } quiet;
  pb::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  pb::io::Tokenizer tokenizer(&input, &quiet);
  tokenizer.set_comment_style(pb::io::Tokenizer::SH_COMMENT_STYLE);
  std::vector<OpenBlock> open;
  // The identifier before the opener ("layer" in "layer {" or "layer: {") and where it is.
  std::string field;
  int field_line = 0, field_column = 0;
  while (tokenizer.Next()) {
    const pb::io::Tokenizer::Token& token = tokenizer.current();
    if (token.type == pb::io::Tokenizer::TYPE_IDENTIFIER) {
      field = token.text;
      field_line = token.line;
      field_column = token.column;
      continue;
    }
    if (token.type == pb::io::Tokenizer::TYPE_SYMBOL && (token.text == "{" || token.text == "<")) {
      if (field.empty())
        open.push_back({token.text, token.line, token.column});
      else
        open.push_back({field + " " + token.text, field_line, field_column});
    } else if (token.type == pb::io::Tokenizer::TYPE_SYMBOL &&
               (token.text == "}" || token.text == ">") && !open.empty()) {
      open.pop_back();
    }
    if (token.text != ":") field.clear();
  }
  *end_line = tokenizer.current().line;
  *end_column = tokenizer.current().column;
  return open;
}

// "name:line:col: explained message" for one parser error or warning (0-based position).
std::string Problem(const std::string& text, const std::string& name, int line, int column,
                    const std::string& message, const pb::Message& root) {
  const std::string explained = Explain(message, root.GetDescriptor());
  if (line < 0) return StrCat(name, ": ", explained);
  // The text ends inside a block: protobuf says "Expected identifier, got: " at the end; say
  // what is missing and where each open block began instead.
  int end_line = -1, end_column = -1;
  const std::vector<OpenBlock> open = BlocksOpenAtEnd(text, &end_line, &end_column);
  if (!open.empty() && line == end_line && column == end_column) {
    std::string where;
    for (size_t i = open.size(); i-- > 0;)
      where += StrCat(i + 1 == open.size() ? "" : ", inside ", "\"", open[i].opener,
                      "\" opened at ", name, ":", open[i].line + 1, ":", open[i].column + 1);
    const char* closer = open.back().opener.back() == '<' ? "'>'" : "'}'";
    return StrCat(name, ":", line + 1, ":", column + 1, ": the file ends inside ",
                  open.size() == 1 ? "the block " : StrCat(open.size(), " blocks: "), where,
                  open.size() == 1 ? StrCat(": a closing ", closer, " is missing")
                                   : StrCat(": ", open.size(), " closing brackets are missing"));
  }
  // Protobuf points past an unknown name (at the token after it); point at the name instead.
  std::string culprit = QuotedAfter(message, "has no field named \"");
  if (culprit.empty()) culprit = QuotedAfter(message, "Unknown enumeration value of \"");
  if (!culprit.empty()) {
    const size_t found = text.rfind(culprit, OffsetOf(text, line, column));
    if (found != std::string::npos) PositionOf(text, found, &line, &column);
  }
  return StrCat(name, ":", line + 1, ":", column + 1, ": ", explained);
}

}  // namespace

std::shared_ptr<ProtoSource> ParseTextProto(const std::string& text, const std::string& name,
                                            pb::Message* message) {
  auto tree = std::make_unique<pb::TextFormat::ParseInfoTree>();
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree.get());
  parser.SetRecursionLimit(kMaxNesting);
  const bool ok = parser.ParseFromString(text, message);
  for (const std::string& warning : errors.warnings()) LOG(WARNING) << name << ":" << warning;
  if (!ok || errors.has_error()) {
    if (!errors.has_error()) {
      CREMA_THROW_CONFIG(name, ": not a valid ", message->GetDescriptor()->name());
    }
    CREMA_THROW_CONFIG(
        Problem(text, name, errors.line(), errors.column(), errors.message(), *message));
  }
  return std::make_shared<ProtoSource>(name, std::move(tree));
}

std::shared_ptr<ProtoSource> ParseTextProtoCollecting(const std::string& text,
                                                      const std::string& name, pb::Message* message,
                                                      std::vector<std::string>* problems,
                                                      bool* syntax_ok) {
  auto tree = std::make_unique<pb::TextFormat::ParseInfoTree>();
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree.get());
  parser.AllowUnknownField(true);  // reported as warnings, so every one of them is seen
  parser.AllowPartialMessage(true);
  parser.SetRecursionLimit(kMaxNesting);
  *syntax_ok = parser.ParseFromString(text, message) && !errors.has_error();
  for (const auto& warning : errors.raw_warnings()) {
    if (QuotedAfter(warning.message, "has no field named \"").empty()) {
      LOG(WARNING) << name << ":" << warning.line + 1 << ":" << warning.column + 1 << ": "
                   << warning.message;
      continue;
    }
    problems->push_back(
        Problem(text, name, warning.line, warning.column, warning.message, *message));
  }
  if (!*syntax_ok) {
    problems->push_back(
        errors.has_error()
            ? Problem(text, name, errors.line(), errors.column(), errors.message(), *message)
            : StrCat(name, ": not a valid ", message->GetDescriptor()->name()));
  }
  return std::make_shared<ProtoSource>(name, std::move(tree));
}

std::shared_ptr<ProtoSource> ReadTextProto(const std::string& path, pb::Message* message) {
  return ParseTextProto(ReadWholeFile(path), path, message);
}

namespace {

// Parses the file at `path` with at most `nesting` levels; false when it is not a valid message.
bool ParseBinaryFile(const std::string& path, int nesting, pb::Message* message) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) CREMA_THROW_RUNTIME("cannot read ", path, ": ", ErrnoText(errno));
  bool ok = false;
  int read_error = 0;
  {
    pb::io::FileInputStream input(fd);
    pb::io::CodedInputStream coded(&input);
    // Caffe's limit: .caffemodel files of large nets exceed protobuf's 64 MB default.
    coded.SetTotalBytesLimit(INT_MAX);
    coded.SetRecursionLimit(nesting);
    ok = message->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    read_error = input.GetErrno();
  }
  ::close(fd);
  if (read_error != 0) CREMA_THROW_RUNTIME("cannot read ", path, ": ", ErrnoText(read_error));
  return ok;
}

}  // namespace

void ReadBinaryProto(const std::string& path, pb::Message* message) {
  if (ParseBinaryFile(path, kMaxNesting, message)) return;
  // Told apart from corruption by a second try with a deeper (still stack-safe) limit.
  std::unique_ptr<pb::Message> deeper(message->New());
  const bool too_deep = ParseBinaryFile(path, 10 * kMaxNesting, deeper.get());
  message->Clear();
  if (too_deep) {
    CREMA_THROW_CONFIG(path, ": not a valid ", message->GetDescriptor()->name(),
                       ": messages nested more than ", kMaxNesting, " levels deep");
  }
  CREMA_THROW_CONFIG(path, ": not a valid ", message->GetDescriptor()->name(),
                     " (truncated or corrupt)");
}

void ReadBlobFromBinaryFile(const std::string& path, Blob* blob) {
  BlobProto proto;
  ReadBinaryProto(path, &proto);
  try {
    blob->FromProto(proto, /*reshape=*/true);
  } catch (const ConfigError& e) {
    CREMA_THROW_CONFIG(path, ": ", e.what());
  }
}

namespace {

// Renames a written and fsynced temporary onto `path`, then makes the rename itself durable
// (failure of that last fsync is not worth an error).
void RenameIntoPlace(const std::string& temp, const std::string& path, const std::string& folder) {
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    CREMA_THROW_RUNTIME("cannot write ", path, ": ", ErrnoText(error));
  }
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

void WriteFileAtomically(const std::string& path, const std::string& contents) {
  // The temporary sits beside the target so rename() stays within one file system.
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = StrCat(folder, "/.", base, ".tmp.", ::getpid(), ".", counter++);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) CREMA_THROW_RUNTIME("cannot write ", path, ": ", ErrnoText(errno));
  auto fail = [&](int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    CREMA_THROW_RUNTIME("cannot write ", path, ": ", ErrnoText(error));
  };
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    CREMA_THROW_RUNTIME("cannot write ", path, ": ", ErrnoText(error));
  }
  RenameIntoPlace(temp, path, folder);
}

void CommitFileAtomically(const std::string& temp, const std::string& path) {
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    CREMA_THROW_RUNTIME("cannot write ", path, ": ", ErrnoText(error));
  }
  ::close(fd);
  const size_t slash = path.rfind('/');
  RenameIntoPlace(temp, path, slash == std::string::npos ? "." : path.substr(0, slash));
}

void WriteBinaryProto(const pb::Message& message, const std::string& path) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    CREMA_THROW_CONFIG("cannot write ", path, ": ", message.GetDescriptor()->name(),
                       " is missing required fields: ", message.InitializationErrorString());
  }
  WriteFileAtomically(path, bytes);
}

void WriteTextProto(const pb::Message& message, const std::string& path) {
  std::string text;
  CREMA_ASSERT(pb::TextFormat::PrintToString(message, &text), "text printing failed");
  WriteFileAtomically(path, text);
}

std::shared_ptr<ProtoSource> ReadNetParamsFromTextFile(const std::string& path,
                                                       NetParameter* param) {
  std::shared_ptr<ProtoSource> source = ReadTextProto(path, param);
  UpgradeNetAsNeeded(path, param);
  return source;
}

void ReadNetParamsFromBinaryFile(const std::string& path, NetParameter* param) {
  ReadBinaryProto(path, param);
  UpgradeNetAsNeeded(path, param);
}

std::shared_ptr<ProtoSource> ReadSolverParamsFromTextFile(const std::string& path,
                                                          SolverParameter* param) {
  std::shared_ptr<ProtoSource> source = ReadTextProto(path, param);
  UpgradeSolverAsNeeded(path, param);
  UpgradeSnapshotPrefix(path, param);
  return source;
}

}  // namespace crema
