#pragma once
// Label maps of object detection (SSD's labelmap_voc.prototxt): a text-format LabelMap, one item
// per class { name, label, display_name }, label 0 usually the background. Read by convert-annoset
// (class names in annotation files -> labels) and by the detection layers and tools (labels ->
// names to show).
#include <map>
#include <string>

#include "crema/proto.hpp"

namespace crema {

// Parses `path` (errors as every prototxt: ConfigError "file:line:col: ...", RuntimeError when it
// can't be read) and checks it: every item has a name and a label, labels are >= 0, and no two
// items share a name or a label (ConfigError at the offending field, naming the earlier item).
LabelMap ReadLabelMap(const std::string& path);
// The same checks on a map already in memory; `where` names it in messages.
void CheckLabelMap(const LabelMap& map, const std::string& where);

std::map<std::string, int> LabelsByName(const LabelMap& map);
// Each label's display_name, or its name when the item has none.
std::map<int, std::string> DisplayNamesByLabel(const LabelMap& map);

// Writes `map` as text, atomically.
void WriteLabelMap(const LabelMap& map, const std::string& path);

}  // namespace crema
