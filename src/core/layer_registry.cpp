#include "crema/layer_registry.hpp"

#include <algorithm>
#include <map>

#include "core/closest_name.hpp"
#include "core/registration_capture.hpp"

namespace crema {
namespace {

// One table per process: this function-local static lives in libcrema, so layers registered by
// libcrema itself and by plugins (dlopen'ed libraries linked against it) land in the same map.
std::map<std::string, LayerRegistry::Creator>& Table() {
  static auto* table = new std::map<std::string, LayerRegistry::Creator>();
  return *table;
}

RegistrationCapture*& ActiveCapture() {
  static RegistrationCapture* capture = nullptr;
  return capture;
}

}  // namespace

void LayerRegistry::Add(const std::string& type, Creator creator) {
  if (RegistrationCapture* capture = ActiveCapture()) {
    // A plugin's static initializers run inside dlopen, where throwing is not safe: record the
    // clash and let LoadPlugin report it.
    if (Table().count(type)) {
      capture->duplicates.push_back(type);
      return;
    }
    capture->added.push_back(type);
    Table()[type] = std::move(creator);
    return;
  }
  CREMA_ASSERT(!Table().count(type), "layer type ", type, " registered twice");
  Table()[type] = std::move(creator);
}

void BeginRegistrationCapture(RegistrationCapture* capture) { ActiveCapture() = capture; }
void EndRegistrationCapture() { ActiveCapture() = nullptr; }
void RemoveLayerType(const std::string& type) { Table().erase(type); }

bool LayerRegistry::Has(const std::string& type) { return Table().count(type) > 0; }

std::vector<std::string> LayerRegistry::Types() {
  std::vector<std::string> types;
  for (const auto& entry : Table()) types.push_back(entry.first);
  return types;
}

std::string LayerRegistry::Suggest(const std::string& type) { return ClosestName(type, Types()); }

std::unique_ptr<Layer> LayerRegistry::Create(const LayerParameter& param) {
  auto it = Table().find(param.type());
#ifdef CREMA_EXCLUDED_LAYER_TYPES
  // The inference-only build (cmake/inference.cmake) leaves out the data layers.
  if (it == Table().end()) {
    const std::string excluded = "," CREMA_EXCLUDED_LAYER_TYPES ",";
    if (excluded.find("," + param.type() + ",") != std::string::npos)
      CREMA_THROW_CONFIG("layer type ", param.type(),
                         " is not in this inference-only build (CREMA_INFERENCE_ONLY); feed the "
                         "net through an Input layer, or use the full crema build");
  }
#endif
  if (it == Table().end()) {
    std::string suggestion = Suggest(param.type());
    CREMA_THROW_CONFIG("unknown layer type \"", param.type(), "\".",
                       suggestion.empty() ? "" : " Did you mean \"" + suggestion + "\"?",
                       " (crema layers lists all; a layer type from a plugin needs --plugin "
                       "LIB.so or CREMA_PLUGIN_PATH)");
  }
  return it->second(param);
}

}  // namespace crema
