// --set overrides: the field path is walked with protobuf reflection; each value is parsed by
// TextFormat as "field: VALUE" into a scratch message of the field's containing type, so every
// field type (numbers, bools, enums, strings, messages) gets protobuf's own parsing and range
// checks, and then moved into place.
#include "overrides.hpp"

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>

#include "core/closest_name.hpp"
#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "net/upgrade.hpp"

namespace crema::cli {
namespace {

namespace pb = google::protobuf;

struct PathPart {
  std::string name;
  int index = -1;  // -1: no [i]
};

std::vector<PathPart> SplitPath(const std::string& flag_text, const std::string& path) {
  std::vector<PathPart> parts;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('.', begin);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(begin, end - begin);
    PathPart parsed;
    const size_t bracket = part.find('[');
    parsed.name = part.substr(0, bracket);
    if (bracket != std::string::npos) {
      const std::string digits = part.substr(bracket + 1, part.size() - bracket - 2);
      if (part.back() != ']' || digits.empty() || digits.size() > 9 ||
          !std::all_of(digits.begin(), digits.end(),
                       [](unsigned char c) { return std::isdigit(c); }))
        CREMA_THROW_CONFIG(flag_text, ": bad index in \"", part, "\" (expected NAME[N])");
      parsed.index = std::stoi(digits);
    }
    if (parsed.name.empty()) CREMA_THROW_CONFIG(flag_text, ": empty field name in \"", path, "\"");
    parts.push_back(parsed);
    begin = end + 1;
  }
  return parts;
}

const pb::FieldDescriptor* FindField(const std::string& flag_text, const pb::Descriptor* type,
                                     const std::string& name) {
  const pb::FieldDescriptor* field = type->FindFieldByName(name);
  if (field != nullptr) return field;
  std::set<std::string> names;
  for (int i = 0; i < type->field_count(); ++i) names.insert(type->field(i)->name());
  const std::string suggestion = ClosestName(name, names);
  CREMA_THROW_CONFIG(flag_text, ": unknown field \"", name, "\" in ", type->name(),
                     suggestion.empty() ? "" : "; did you mean \"" + suggestion + "\"?");
}

class FirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int, pb::io::ColumnNumber, const std::string& message) override {
    if (message_.empty()) message_ = message;
  }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

std::string EnumValueNames(const pb::EnumDescriptor* type, std::set<std::string>* names) {
  std::string text;
  for (int i = 0; i < type->value_count(); ++i) {
    names->insert(type->value(i)->name());
    text += (i ? ", " : "") + type->value(i)->name();
  }
  return text;
}

// The value as protobuf text: strings are quoted (and escaped) unless already quoted; a message
// value is given in braces, which are added when missing.
std::string ValueText(const pb::FieldDescriptor* field, const std::string& value) {
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
    if (!value.empty() && (value[0] == '"' || value[0] == '\'')) return value;
    return "\"" + pb::CEscape(value) + "\"";
  }
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
    return !value.empty() && value[0] == '{' ? value : "{ " + value + " }";
  return value;
}

// Parses "name: VALUE" into a new message of `type`; ConfigError explaining a bad value.
std::unique_ptr<pb::Message> ParseValue(const std::string& flag_text, const pb::Message& prototype,
                                        const pb::FieldDescriptor* field,
                                        const std::string& value) {
  std::unique_ptr<pb::Message> scratch(prototype.New());
  const bool is_message = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
  const std::string text = field->name() + (is_message ? " " : ": ") + ValueText(field, value);
  FirstError errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowPartialMessage(true);
  if (parser.ParseFromString(text, scratch.get()) && errors.message().empty()) return scratch;
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
    std::set<std::string> names;
    const std::string all = EnumValueNames(field->enum_type(), &names);
    const std::string suggestion = ClosestName(value, names);
    CREMA_THROW_CONFIG(flag_text, ": \"", value, "\" is not a value of ", field->name(),
                       suggestion.empty() ? "" : "; did you mean \"" + suggestion + "\"?",
                       " (one of ", all, ")");
  }
  if (is_message) {
    CREMA_THROW_CONFIG(flag_text, ": not a valid ", field->message_type()->name(), " for ",
                       field->name(), ": ", errors.message(), " (give { field: value ... })");
  }
  CREMA_THROW_CONFIG(flag_text, ": \"", value, "\" is not a valid ", field->type_name(), " for ",
                     field->name(), errors.message().empty() ? "" : " (" + errors.message() + ")");
}

// Splits a repeated field's value list at commas (a quoted string or a message stays whole).
std::vector<std::string> SplitValues(const pb::FieldDescriptor* field, const std::string& value) {
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE ||
      (!value.empty() && (value[0] == '"' || value[0] == '\'')))
    return {value};
  std::vector<std::string> values;
  size_t begin = 0;
  for (;;) {
    const size_t comma = value.find(',', begin);
    values.push_back(value.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return values;
}

// Moves the last element of the repeated `field` to position `index`, dropping what was there.
void ReplaceWithLast(pb::Message* message, const pb::FieldDescriptor* field, int index) {
  const pb::Reflection* reflection = message->GetReflection();
  const int last = reflection->FieldSize(*message, field) - 1;
  if (index == last) return;
  reflection->SwapElements(message, field, index, last);
  reflection->RemoveLast(message, field);
}

void SetLeaf(const std::string& flag_text, const std::string& label, const PathPart& part,
             const std::string& value, pb::Message* message, ClearedFields* cleared) {
  const pb::FieldDescriptor* field = FindField(flag_text, message->GetDescriptor(), part.name);
  const pb::Reflection* reflection = message->GetReflection();
  const std::string before = FieldValueText(*message, field);
  if (!field->is_repeated()) {
    if (part.index >= 0)
      CREMA_THROW_CONFIG(flag_text, ": ", field->name(), " is not a repeated field; drop [",
                         part.index, "]");
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      reflection->ClearField(message, field);
    message->MergeFrom(*ParseValue(flag_text, *message, field, value));
  } else if (part.index >= 0) {
    const int size = reflection->FieldSize(*message, field);
    if (part.index > size)
      CREMA_THROW_CONFIG(flag_text, ": ", field->name(), " has ", size, " value(s); index ",
                         part.index, " is out of range (", size, " appends one)");
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && part.index < size) {
      const auto parsed = ParseValue(flag_text, *message, field, value);
      reflection->MutableRepeatedMessage(message, field, part.index)
          ->MergeFrom(parsed->GetReflection()->GetRepeatedMessage(*parsed, field, 0));
    } else {
      message->MergeFrom(*ParseValue(flag_text, *message, field, value));
      if (part.index < size) ReplaceWithLast(message, field, part.index);
    }
  } else {
    // The first --set of a repeated field replaces the file's list; later ones append.
    if (cleared->insert({message, field}).second) reflection->ClearField(message, field);
    for (const std::string& item : SplitValues(field, value))
      message->MergeFrom(*ParseValue(flag_text, *message, field, item));
  }
  LOG(INFO) << "--set " << label << part.name << (part.index >= 0 ? "[" : "")
            << (part.index >= 0 ? std::to_string(part.index) + "]" : "") << ": " << before << " -> "
            << FieldValueText(*message, field);
}

void Apply(const std::string& flag_text, const std::string& label,
           const std::vector<PathPart>& parts, size_t i, const std::string& value,
           pb::Message* message, ClearedFields* cleared) {
  if (i + 1 == parts.size()) {
    SetLeaf(flag_text, label, parts[i], value, message, cleared);
    return;
  }
  const PathPart& part = parts[i];
  const pb::FieldDescriptor* field = FindField(flag_text, message->GetDescriptor(), part.name);
  if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
    CREMA_THROW_CONFIG(flag_text, ": ", field->name(), " is of type ", field->type_name(),
                       ", not a message; nothing to set inside it");
  const pb::Reflection* reflection = message->GetReflection();
  if (!field->is_repeated()) {
    if (part.index >= 0)
      CREMA_THROW_CONFIG(flag_text, ": ", field->name(), " is not a repeated field; drop [",
                         part.index, "]");
    Apply(flag_text, label + part.name + ".", parts, i + 1, value,
          reflection->MutableMessage(message, field), cleared);
    return;
  }
  const int size = reflection->FieldSize(*message, field);
  if (part.index > size)
    CREMA_THROW_CONFIG(flag_text, ": ", field->name(), " has ", size, " element(s); index ",
                       part.index, " is out of range (", size, " appends one)");
  if (part.index == size || (part.index < 0 && size == 0)) reflection->AddMessage(message, field);
  const int first = part.index >= 0 ? part.index : 0;
  const int last = part.index >= 0 ? part.index : reflection->FieldSize(*message, field) - 1;
  for (int k = first; k <= last; ++k)
    Apply(flag_text, StrCat(label, part.name, "[", k, "]."), parts, i + 1, value,
          reflection->MutableRepeatedMessage(message, field, k), cleared);
}

// The nets a solver refers to, read into the solver inline; each with a description.
std::vector<std::pair<NetParameter*, std::string>> InlineNets(const std::string& base_dir,
                                                              SolverParameter* param) {
  auto resolve = [&](const std::string& path) {
    if (base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
    return (std::filesystem::path(base_dir) / path).lexically_normal().string();
  };
  std::vector<std::pair<NetParameter*, std::string>> nets;
  if (param->has_net()) {
    ReadNetParamsFromTextFile(resolve(param->net()), param->mutable_net_param());
    nets.emplace_back(param->mutable_net_param(), param->net());
    param->clear_net();
  } else if (param->has_net_param()) {
    UpgradeNetAsNeeded("net_param", param->mutable_net_param());
    nets.emplace_back(param->mutable_net_param(), "net_param");
  }
  if (param->has_train_net()) {
    ReadNetParamsFromTextFile(resolve(param->train_net()), param->mutable_train_net_param());
    nets.emplace_back(param->mutable_train_net_param(), param->train_net());
    param->clear_train_net();
  } else if (param->has_train_net_param()) {
    UpgradeNetAsNeeded("train_net_param", param->mutable_train_net_param());
    nets.emplace_back(param->mutable_train_net_param(), "train_net_param");
  }
  // The solver builds test nets from test_net_param first, then test_net files: appending the
  // files' nets after the inline ones keeps that order.
  const int num_inline = param->test_net_param_size();
  for (const std::string& file : param->test_net())
    ReadNetParamsFromTextFile(resolve(file), param->add_test_net_param());
  for (int i = 0; i < param->test_net_param_size(); ++i) {
    if (i < num_inline) UpgradeNetAsNeeded("test_net_param", param->mutable_test_net_param(i));
    nets.emplace_back(param->mutable_test_net_param(i), i < num_inline
                                                            ? StrCat("test_net_param[", i, "]")
                                                            : param->test_net(i - num_inline));
  }
  param->clear_test_net();
  return nets;
}

}  // namespace

std::vector<Override> ParseOverrides(const std::vector<std::string>& items, const char* flag) {
  std::vector<Override> overrides;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      CREMA_THROW_CONFIG(flag, " ", item, ": expected FIELD=VALUE (", flag,
                         " base_lr=0.01, --set net.conv1.convolution_param.num_output=32)");
    overrides.push_back({item.substr(0, eq), item.substr(eq + 1)});
  }
  return overrides;
}

std::string FieldValueText(const pb::Message& message, const pb::FieldDescriptor* field) {
  pb::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  const pb::Reflection* reflection = message.GetReflection();
  auto element = [&](int index) {
    std::string text;
    printer.PrintFieldValueToString(message, field, index, &text);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      while (!text.empty() && text.back() == ' ') text.pop_back();
      text = "{ " + text + (text.empty() ? "}" : " }");
    }
    return text;
  };
  if (field->is_repeated()) {
    std::string text = "[";
    for (int i = 0; i < reflection->FieldSize(message, field); ++i)
      text += (i ? ", " : "") + element(i);
    return text + "]";
  }
  return (reflection->HasField(message, field) ? "" : "(unset) ") + element(-1);
}

void ApplyFieldOverride(const std::string& flag_text, const std::string& label,
                        const std::string& path, const std::string& value, pb::Message* root,
                        ClearedFields* cleared) {
  Apply(flag_text, label, SplitPath(flag_text, path), 0, value, root, cleared);
}

void ApplySolverOverrides(const std::vector<Override>& overrides, SolverParameter* param) {
  ClearedFields cleared;
  for (const Override& o : overrides) {
    if (o.targets_net()) continue;
    ApplyFieldOverride("--set " + o.text(), "", o.path, o.value, param, &cleared);
  }
}

bool ApplyNetOverrides(const std::vector<Override>& overrides, const std::string& base_dir,
                       SolverParameter* param) {
  if (std::none_of(overrides.begin(), overrides.end(),
                   [](const Override& o) { return o.targets_net(); }))
    return false;
  const auto nets = InlineNets(base_dir, param);
  ClearedFields cleared;
  for (const Override& o : overrides) {
    if (!o.targets_net()) continue;
    const std::string flag_text = "--set " + o.text();
    const std::string rest = o.path.substr(4);
    bool applied = false;
    std::set<std::string> layer_names;
    for (const auto& [net, description] : nets) {
      // The longest layer name L with rest == "L.PATH" (layer names may contain dots).
      std::string layer_name;
      for (const LayerParameter& layer : net->layer()) {
        layer_names.insert(layer.name());
        if (rest.size() > layer.name().size() + 1 && rest.rfind(layer.name() + ".", 0) == 0 &&
            layer.name().size() > layer_name.size())
          layer_name = layer.name();
      }
      if (layer_name.empty()) continue;
      const std::string path = rest.substr(layer_name.size() + 1);
      for (LayerParameter& layer : *net->mutable_layer()) {
        if (layer.name() != layer_name) continue;
        ApplyFieldOverride(flag_text, StrCat(description, ": layer \"", layer_name, "\" "), path,
                           o.value, &layer, &cleared);
        applied = true;
      }
    }
    if (applied) continue;
    const std::string first = rest.substr(0, rest.find_first_of(".["));
    if (NetParameter::descriptor()->FindFieldByName(first) != nullptr) {
      for (const auto& [net, description] : nets)
        ApplyFieldOverride(flag_text, description + ": ", rest, o.value, net, &cleared);
      continue;
    }
    const std::string suggestion = ClosestName(rest.substr(0, rest.find('.')), layer_names);
    CREMA_THROW_CONFIG(flag_text, ": no layer named \"", rest.substr(0, rest.find('.')),
                       "\" in the solver's nets",
                       suggestion.empty() ? "" : "; did you mean \"" + suggestion + "\"?",
                       " (expected net.LAYER.FIELD=VALUE or net.NET_FIELD=VALUE)");
  }
  return true;
}

}  // namespace crema::cli
