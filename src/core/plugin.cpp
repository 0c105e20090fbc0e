#include "crema/plugin.hpp"

#include <dlfcn.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>

#include "core/closest_name.hpp"
#include "core/registration_capture.hpp"
#include "crema/layer_registry.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

struct LoadedPlugin {
  std::string path;
  void* handle;
  std::vector<std::string> types;
};

// Recursive: a plugin's static initializers run while LoadPlugin holds the lock and may ask
// which plugin registered a type.
std::recursive_mutex& PluginMutex() {
  static auto* mutex = new std::recursive_mutex();
  return *mutex;
}

std::vector<LoadedPlugin>& Plugins() {
  static auto* plugins = new std::vector<LoadedPlugin>();
  return *plugins;
}

std::string Join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// Re-throws a plugin error with `context` in front, keeping its kind (and exit code).
template <typename Fn>
auto WithContext(const std::string& context, Fn fn) {
  try {
    return fn();
  } catch (const ConfigError& e) {
    throw ConfigError(context + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(context + e.what());
  }
}

}  // namespace

std::vector<std::string> LoadPlugin(const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(PluginMutex());
  if (path.empty()) CREMA_THROW_CONFIG("plugin: empty path");
  std::error_code ec;
  if (!fs::exists(path, ec)) CREMA_THROW_RUNTIME("cannot load plugin ", path, ": no such file");
  if (fs::is_directory(path, ec))
    CREMA_THROW_RUNTIME("cannot load plugin ", path,
                        ": is a folder; give its .so file (CREMA_PLUGIN_PATH accepts folders)");
  // dlopen looks a name without '/' up in the library search path; a plugin is a file.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;

  RegistrationCapture capture;
  BeginRegistrationCapture(&capture);
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  EndRegistrationCapture();
  if (handle == nullptr) {
    for (const std::string& type : capture.added) RemoveLayerType(type);
    const char* error = dlerror();
    CREMA_THROW_RUNTIME("cannot load plugin ", path, ": ", error ? error : "dlopen failed");
  }
  for (const LoadedPlugin& plugin : Plugins()) {
    if (plugin.handle != handle) continue;
    dlclose(handle);  // the same library again: drop the extra reference; it stays loaded
    return plugin.types;
  }
  if (!capture.duplicates.empty()) {
    for (const std::string& type : capture.added) RemoveLayerType(type);
    dlclose(handle);
    const std::string& type = capture.duplicates.front();
    const std::string owner = PluginOfLayerType(type);
    CREMA_THROW_CONFIG("plugin ", path, ": layer type \"", type, "\" is already registered ",
                       owner.empty() ? "by crema" : "by plugin " + owner,
                       "; give the plugin's layer another type name");
  }
  if (capture.added.empty())
    LOG(WARNING) << "plugin " << path
                 << " registered no layer type (does it use CREMA_REGISTER_LAYER and link "
                    "libcrema as a shared library?)";
  else
    LOG(INFO) << "plugin " << path << ": layer types " << Join(capture.added, ", ");
  Plugins().push_back({path, handle, capture.added});
  return capture.added;
}

std::vector<std::string> LoadPluginsFromEnv() {
  const char* env = std::getenv("CREMA_PLUGIN_PATH");
  std::vector<std::string> types;
  if (env == nullptr) return types;
  const std::string list = env;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    std::error_code ec;
    std::vector<std::string> files;
    if (fs::is_directory(entry, ec)) {
      for (const auto& item : fs::directory_iterator(entry, ec))
        if (item.path().extension() == ".so" && !item.is_directory(ec))
          files.push_back(item.path().string());
      std::sort(files.begin(), files.end());
    } else if (fs::exists(entry, ec)) {
      files.push_back(entry);
    } else {
      CREMA_THROW_RUNTIME("CREMA_PLUGIN_PATH: ", entry, " does not exist");
    }
    for (const std::string& file : files) {
      std::vector<std::string> added =
          WithContext("CREMA_PLUGIN_PATH: ", [&] { return LoadPlugin(file); });
      types.insert(types.end(), added.begin(), added.end());
    }
  }
  return types;
}

std::vector<PluginInfo> LoadedPlugins() {
  std::lock_guard<std::recursive_mutex> lock(PluginMutex());
  std::vector<PluginInfo> out;
  for (const LoadedPlugin& plugin : Plugins()) out.push_back({plugin.path, plugin.types});
  return out;
}

std::string PluginOfLayerType(const std::string& type) {
  std::lock_guard<std::recursive_mutex> lock(PluginMutex());
  for (const LoadedPlugin& plugin : Plugins())
    if (std::find(plugin.types.begin(), plugin.types.end(), type) != plugin.types.end())
      return plugin.path;
  return "";
}

void CheckAttrNames(const Layer& layer, std::initializer_list<const char*> known) {
  std::set<std::string> keys;
  for (const auto& entry : layer.layer_param().plugin_param().attr()) keys.insert(entry.first);
  std::vector<std::string> names(known.begin(), known.end());
  for (const std::string& key : keys) {
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    const std::string best = ClosestName(key, names);
    throw ConfigError(layer.ErrorPrefix("plugin_param.attr") +
                      StrCat("unknown plugin_param.attr \"", key, "\".",
                             best.empty() ? "" : " Did you mean \"" + best + "\"?",
                             " (this layer reads: ", Join(names, ", "), ")"));
  }
}

namespace plugin_detail {

bool ParseAttr(const std::string& text, bool* value) {
  if (text == "true" || text == "1") {
    *value = true;
  } else if (text == "false" || text == "0") {
    *value = false;
  } else {
    return false;
  }
  return true;
}

bool ParseAttr(const std::string& text, int64_t* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return false;
  *value = parsed;
  return true;
}

bool ParseAttr(const std::string& text, int32_t* value) {
  int64_t wide = 0;
  if (!ParseAttr(text, &wide) || wide < std::numeric_limits<int32_t>::min() ||
      wide > std::numeric_limits<int32_t>::max())
    return false;
  *value = static_cast<int32_t>(wide);
  return true;
}

bool ParseAttr(const std::string& text, double* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || end != text.c_str() + text.size() || std::isnan(parsed)) return false;
  *value = parsed;
  return true;
}

bool ParseAttr(const std::string& text, float* value) {
  double wide = 0;
  if (!ParseAttr(text, &wide) || (std::isfinite(wide) && std::fabs(wide) > FLT_MAX)) return false;
  *value = static_cast<float>(wide);
  return true;
}

bool ParseAttr(const std::string& text, std::string* value) {
  *value = text;
  return true;
}

std::string LayerPrefix(const LayerParameter& param) {
  return StrCat("layer \"", param.name(), "\" (", param.type(), "): ");
}

void ThrowBadAttr(const std::string& prefix, const std::string& key, const std::string& text,
                  const char* type_name) {
  throw ConfigError(prefix + StrCat("plugin_param.attr \"", key, "\" must be ", type_name,
                                    ", got \"", text, "\""));
}

void ThrowMissingAttr(const std::string& prefix, const std::string& key, const char* type_name) {
  throw ConfigError(prefix + StrCat("plugin_param.attr \"", key, "\" is required (", type_name,
                                    "): add attr { key: \"", key, "\" value: \"...\" }"));
}

}  // namespace plugin_detail
}  // namespace crema
