#pragma once
// Plugins: layer types built outside crema. A plugin is a shared library linked against libcrema
// whose .cpp files register layers with CREMA_REGISTER_LAYER, exactly as layers/*/ do; loading it
// runs those registrations. Its layers read their parameters from the generic
//   plugin_param { param_str: "..." attr { key: "alpha" value: "0.5" } }
// with GetAttr below, so neither crema nor its schema is recompiled. See examples/plugin/.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

struct PluginInfo {
  std::string path;                // as given to LoadPlugin
  std::vector<std::string> types;  // layer types it registered
};

// dlopen(RTLD_NOW | RTLD_GLOBAL)s the library at `path` and returns the layer types it added.
// Loading the same library again does nothing and returns its types. RuntimeError (with the
// path) when the file is missing or dlopen fails (its message included); ConfigError when the
// plugin registers a type that is already registered (the plugin is then unloaded again).
std::vector<std::string> LoadPlugin(const std::string& path);
// Loads every entry of CREMA_PLUGIN_PATH (colon-separated): a .so file, or a folder whose *.so
// files are loaded in name order. Returns the types added; errors as LoadPlugin, and
// RuntimeError for an entry that does not exist.
std::vector<std::string> LoadPluginsFromEnv();
// The plugins loaded so far, in load order.
std::vector<PluginInfo> LoadedPlugins();
// The path of the plugin that registered `type`, or "" for a built-in (or unknown) type.
std::string PluginOfLayerType(const std::string& type);

// plugin_param.attr[key] of `layer` converted to T (bool, int32_t, int64_t, float, double or
// std::string), or `default_value` when the key is absent. A value that does not convert is a
// ConfigError naming the layer (with its file:line:col), the key and the value.
template <typename T>
T GetAttr(const Layer& layer, const std::string& key, const T& default_value);
// As above, for an attribute the layer requires: ConfigError when it is absent.
template <typename T>
T GetAttr(const Layer& layer, const std::string& key);
// The same for a bare LayerParameter (the error names the layer, without a file location).
template <typename T>
T GetAttr(const LayerParameter& param, const std::string& key, const T& default_value);
template <typename T>
T GetAttr(const LayerParameter& param, const std::string& key);
// ConfigError for an attribute not in `known` (a typo would otherwise silently use a default),
// with a "did you mean" suggestion.
void CheckAttrNames(const Layer& layer, std::initializer_list<const char*> known);

namespace plugin_detail {

// Converts `text` into *value; false when it is not a valid T.
bool ParseAttr(const std::string& text, bool* value);
bool ParseAttr(const std::string& text, int32_t* value);
bool ParseAttr(const std::string& text, int64_t* value);
bool ParseAttr(const std::string& text, float* value);
bool ParseAttr(const std::string& text, double* value);
bool ParseAttr(const std::string& text, std::string* value);
// What a value of that type looks like, for error messages.
inline const char* AttrTypeName(const bool*) { return "true or false"; }
inline const char* AttrTypeName(const int32_t*) { return "a 32-bit integer"; }
inline const char* AttrTypeName(const int64_t*) { return "an integer"; }
inline const char* AttrTypeName(const float*) { return "a number"; }
inline const char* AttrTypeName(const double*) { return "a number"; }
inline const char* AttrTypeName(const std::string*) { return "a string"; }
std::string LayerPrefix(const LayerParameter& param);
[[noreturn]] void ThrowBadAttr(const std::string& prefix, const std::string& key,
                               const std::string& text, const char* type_name);
[[noreturn]] void ThrowMissingAttr(const std::string& prefix, const std::string& key,
                                   const char* type_name);

template <typename T>
T GetAttrImpl(const LayerParameter& param, const std::string& prefix, const std::string& key,
              const T* default_value) {
  const auto& attr = param.plugin_param().attr();
  auto it = attr.find(key);
  if (it == attr.end()) {
    if (default_value == nullptr)
      ThrowMissingAttr(prefix, key, AttrTypeName(static_cast<const T*>(nullptr)));
    return *default_value;
  }
  T value{};
  if (!ParseAttr(it->second, &value))
    ThrowBadAttr(prefix, key, it->second, AttrTypeName(static_cast<const T*>(nullptr)));
  return value;
}

}  // namespace plugin_detail

template <typename T>
T GetAttr(const Layer& layer, const std::string& key, const T& default_value) {
  return plugin_detail::GetAttrImpl<T>(layer.layer_param(), layer.ErrorPrefix("plugin_param.attr"),
                                       key, &default_value);
}
template <typename T>
T GetAttr(const Layer& layer, const std::string& key) {
  return plugin_detail::GetAttrImpl<T>(layer.layer_param(), layer.ErrorPrefix("plugin_param.attr"),
                                       key, nullptr);
}
template <typename T>
T GetAttr(const LayerParameter& param, const std::string& key, const T& default_value) {
  return plugin_detail::GetAttrImpl<T>(param, plugin_detail::LayerPrefix(param), key,
                                       &default_value);
}
template <typename T>
T GetAttr(const LayerParameter& param, const std::string& key) {
  return plugin_detail::GetAttrImpl<T>(param, plugin_detail::LayerPrefix(param), key, nullptr);
}

}  // namespace crema
