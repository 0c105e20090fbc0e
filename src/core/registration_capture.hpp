#pragma once
// Internal to libcrema: how LoadPlugin (plugin.cpp) watches the layer registry while a plugin's
// static initializers run. Not part of the public API.
#include <string>
#include <vector>

namespace crema {

struct RegistrationCapture {
  std::vector<std::string> added;       // types newly registered
  std::vector<std::string> duplicates;  // types already registered (left unchanged)
};

// While a capture is active, LayerRegistry::Add records into it instead of asserting on a
// duplicate type. Not thread-safe: LoadPlugin serialises plugin loading.
void BeginRegistrationCapture(RegistrationCapture* capture);
void EndRegistrationCapture();
// Undoes a registration (a plugin that failed to load is unloaded again).
void RemoveLayerType(const std::string& type);

}  // namespace crema
