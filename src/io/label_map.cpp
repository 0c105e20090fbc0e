#include "io/label_map.hpp"

#include <memory>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"

namespace crema {
namespace {

// Checks `map`; `locate(field_path)` is where a field is ("file:line:col", or the name alone).
template <typename Locate>
void Check(const LabelMap& map, const Locate& locate) {
  std::map<std::string, int> items_by_name;
  std::map<int, int> items_by_label;
  for (int i = 0; i < map.item_size(); ++i) {
    const LabelMapItem& item = map.item(i);
    const std::string at = StrCat("item[", i, "]");
    if (!item.has_name()) CREMA_THROW_CONFIG(locate(at), ": label map item ", i, " has no name");
    const std::string what = StrCat("label map item \"", item.name(), "\"");
    if (!item.has_label()) CREMA_THROW_CONFIG(locate(at), ": ", what, " has no label");
    if (item.label() < 0)
      CREMA_THROW_CONFIG(locate(at + ".label"), ": ", what, ": label must be >= 0, got ",
                         item.label());
    const auto name = items_by_name.emplace(item.name(), i);
    if (!name.second)
      CREMA_THROW_CONFIG(locate(at + ".name"), ": ", what, " is named twice (first at ",
                         locate(StrCat("item[", name.first->second, "].name")), ")");
    const auto label = items_by_label.emplace(item.label(), i);
    if (!label.second)
      CREMA_THROW_CONFIG(locate(at + ".label"), ": ", what, ": label ", item.label(),
                         " is also the label of \"", map.item(label.first->second).name(), "\" (",
                         locate(StrCat("item[", label.first->second, "].label")), ")");
  }
}

}  // namespace

LabelMap ReadLabelMap(const std::string& path) {
  LabelMap map;
  const std::shared_ptr<ProtoSource> source = ReadTextProto(path, &map);
  Check(map, [&](const std::string& field) { return source->Locate(map, field); });
  return map;
}

void CheckLabelMap(const LabelMap& map, const std::string& where) {
  Check(map, [&](const std::string& field) { return StrCat(where, ": ", field); });
}

std::map<std::string, int> LabelsByName(const LabelMap& map) {
  std::map<std::string, int> labels;
  for (const LabelMapItem& item : map.item()) labels.emplace(item.name(), item.label());
  return labels;
}

std::map<int, std::string> DisplayNamesByLabel(const LabelMap& map) {
  std::map<int, std::string> names;
  for (const LabelMapItem& item : map.item())
    names.emplace(item.label(), item.has_display_name() ? item.display_name() : item.name());
  return names;
}

void WriteLabelMap(const LabelMap& map, const std::string& path) { WriteTextProto(map, path); }

}  // namespace crema
