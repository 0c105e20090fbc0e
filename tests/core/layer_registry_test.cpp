// Every layers/<name>/ folder registers its layer types, and the registry answers unknown types
// with a suggestion.
#include "crema/layer_registry.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

TEST(LayerRegistryTest, EveryLayerFolderIsRegistered) {
  const fs::path layers = fs::path(CREMA_SOURCE_DIR) / "layers";
  const std::regex registration(R"(CREMA_REGISTER_LAYER\(\s*(\w+)\s*,)");
  int folders = 0;
  for (const auto& folder : fs::directory_iterator(layers)) {
    if (!folder.is_directory()) continue;
    ++folders;
    int registered = 0;
    for (const auto& file : fs::directory_iterator(folder.path())) {
      if (file.path().extension() != ".cpp") continue;
      const std::string text = testing::ReadFile(file.path().string());
      for (std::sregex_iterator it(text.begin(), text.end(), registration), end; it != end; ++it) {
        ++registered;
        EXPECT_TRUE(LayerRegistry::Has((*it)[1].str()))
            << (*it)[1].str() << " from " << file.path() << " is not in the registry";
      }
    }
    EXPECT_GT(registered, 0) << folder.path() << " registers no layer type";
  }
  EXPECT_GT(folders, 10);
}

TEST(LayerRegistryTest, UnknownTypeSuggestsTheClosest) {
  LayerParameter param;
  param.set_name("r");
  param.set_type("Relu");
  try {
    LayerRegistry::Create(param);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Did you mean \"ReLU\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(LayerRegistry::Suggest("Convolutoin"), "Convolution");
  EXPECT_EQ(LayerRegistry::Suggest("CompletelyDifferent"), "");
}

}  // namespace
}  // namespace crema
