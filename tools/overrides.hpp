#pragma once
// --set PATH=VALUE: overrides of SolverParameter fields and of the layers of the solver's nets,
// by field name, with values in protobuf text syntax (so every field type works).
//
// PATH grammar (documented in `crema train --help`):
//   FIELD                     a field of SolverParameter: base_lr, lr_policy, snapshot_format
//   A.B.C                     a field inside a nested message: train_state.level
//   A[i].B                    element i of a repeated message (i == size appends one);
//                             without [i] the override applies to every element (one is
//                             created when there is none)
//   FIELD[i]                  element i of a repeated scalar (i == size appends)
//   net.LAYER.PATH            PATH inside every layer named LAYER of the solver's nets
//                             (net.conv1.convolution_param.num_output, net.fc8.param.lr_mult)
//   net.FIELD                 a NetParameter field of the solver's nets (net.force_backward)
// VALUE: scalars as in a prototxt (quotes optional for strings, enum names, true/false); a
// repeated field takes a comma-separated list (stepvalue=1000,2000), and the first --set of a
// repeated field replaces the file's list while later ones append; a message field takes
// "{ field: value ... }", merged into the message.
#include <google/protobuf/message.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crema/proto.hpp"

namespace crema::cli {

struct Override {
  std::string path;   // "base_lr", "train_state.level", "net.conv1.convolution_param.num_output"
  std::string value;  // the text after the first '='
  bool targets_net() const { return path.rfind("net.", 0) == 0; }
  std::string text() const { return path + "=" + value; }
};

// Splits each "PATH=VALUE" (ConfigError when there is no '=' or no PATH). `flag` names the flag
// in error messages ("--set").
std::vector<Override> ParseOverrides(const std::vector<std::string>& items, const char* flag);

// Repeated fields already replaced by an earlier override (later ones append to them).
using ClearedFields =
    std::set<std::pair<const google::protobuf::Message*, const google::protobuf::FieldDescriptor*>>;

// Applies `path` = `value` to `root` (see the grammar above, without the net. part); ConfigError
// naming `flag_text` for an unknown field (with a suggestion), an index out of range or a value
// that is not valid for the field's type. Logs one notice per field changed, prefixed `label`.
void ApplyFieldOverride(const std::string& flag_text, const std::string& label,
                        const std::string& path, const std::string& value,
                        google::protobuf::Message* root, ClearedFields* cleared);

// Applies the overrides that do not start with "net." to `param`.
void ApplySolverOverrides(const std::vector<Override>& overrides, SolverParameter* param);

// Applies the net.* overrides to the nets `param` refers to. When there is any, every net given
// by file (net, train_net, test_net; relative paths against `base_dir`, "" = the cwd) is read and
// put inline (net_param, train_net_param, test_net_param), so the solver carries the overridden
// nets; paths inside the nets (data sources, mean files) are unchanged. Returns whether any
// override was applied.
bool ApplyNetOverrides(const std::vector<Override>& overrides, const std::string& base_dir,
                       SolverParameter* param);

// The text of a field's current value, for notices: "0.01", "[1000, 2000]", "(unset) 0".
std::string FieldValueText(const google::protobuf::Message& message,
                           const google::protobuf::FieldDescriptor* field);

}  // namespace crema::cli
