// crema layers: the registered layer types (the names a prototxt's `type:` may use).
#include <cstdio>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "crema/plugin.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

int RunLayers(const std::vector<std::string>& args) {
  for (const std::string& type : LayerRegistry::Types()) {
    const std::string plugin = PluginOfLayerType(type);
    if (plugin.empty())
      std::printf("%s\n", type.c_str());
    else
      std::printf("%s  (plugin %s)\n", type.c_str(), plugin.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    layers, "layers", "list the registered layer types",
    "crema layers\n\nPrints every layer type this crema knows, one per line, in "
    "alphabetical order: the values a prototxt's `type:` field may take. Types added by a "
    "plugin (--plugin, CREMA_PLUGIN_PATH) are followed by \"(plugin PATH)\".",
    {}, &crema::cli::RunLayers);
