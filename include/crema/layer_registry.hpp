#pragma once
// Layer types by prototxt type string. Each layer registers itself in its own .cpp with
// CREMA_REGISTER_LAYER(Type, Class); plugins register through the same table.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class LayerRegistry {
 public:
  using Creator = std::function<std::unique_ptr<Layer>(const LayerParameter&)>;
  static void Add(const std::string& type, Creator creator);
  static bool Has(const std::string& type);
  // ConfigError (with a "did you mean" suggestion) for an unknown type.
  static std::unique_ptr<Layer> Create(const LayerParameter& param);
  static std::vector<std::string> Types();
  // The registered type closest to `type` by edit distance, or "" when none is close.
  static std::string Suggest(const std::string& type);
};

struct LayerRegisterer {
  LayerRegisterer(const char* type, LayerRegistry::Creator creator) {
    LayerRegistry::Add(type, std::move(creator));
  }
};

}  // namespace crema

#define CREMA_REGISTER_LAYER(type, Class)                                              \
  static ::crema::LayerRegisterer crema_layer_registerer_##type(                       \
      #type, [](const ::crema::LayerParameter& p) -> std::unique_ptr<::crema::Layer> { \
        return std::make_unique<Class>(p);                                             \
      })
