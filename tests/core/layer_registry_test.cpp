// Every layer type BVLC Caffe registers is registered, every layers/<name>/ folder registers its
// layer types, and the registry answers unknown types with a suggestion.
#include "crema/layer_registry.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

// The types BVLC Caffe (master) registers: REGISTER_LAYER_CLASS in src/caffe/layers/*.cpp and
// REGISTER_LAYER_CREATOR in src/caffe/layer_factory.cpp (Convolution, Deconvolution, Pooling, LRN,
// ReLU, Sigmoid, Softmax, TanH). Python exists only WITH_PYTHON_LAYER and is not listed.
constexpr char kCaffeLayerTypes[] =
    "AbsVal Accuracy ArgMax BatchNorm BatchReindex Bias BNLL Clip Concat ContrastiveLoss "
    "Convolution Crop Data Deconvolution Dropout DummyData Eltwise ELU Embed EuclideanLoss "
    "Exp Filter Flatten HDF5Data HDF5Output HingeLoss Im2col ImageData InfogainLoss "
    "InnerProduct Input Log LRN LSTM LSTMUnit MemoryData MultinomialLogisticLoss MVN "
    "Parameter Pooling Power PReLU Reduction ReLU Reshape RNN Scale Sigmoid "
    "SigmoidCrossEntropyLoss Silence Slice Softmax SoftmaxWithLoss Split SPP Swish TanH "
    "Threshold Tile WindowData";

TEST(LayerRegistryTest, EveryCaffeLayerTypeIsRegistered) {
  std::istringstream types(kCaffeLayerTypes);
  int count = 0;
  std::vector<std::string> missing;
  for (std::string type; types >> type; ++count)
    if (!LayerRegistry::Has(type)) missing.push_back(type);
  EXPECT_EQ(count, 60);
  std::string list;
  for (const std::string& type : missing) list += (list.empty() ? "" : ", ") + type;
  EXPECT_TRUE(missing.empty()) << missing.size() << " of " << count
                               << " BVLC Caffe layer types are not registered: " << list;
}

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
  param.set_type("MyPluginLayer");
  try {
    LayerRegistry::Create(param);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    // Not a typo of a built-in type: maybe a plugin's, so the message says how to load one.
    EXPECT_NE(std::string(e.what()).find("--plugin"), std::string::npos) << e.what();
  }
  EXPECT_EQ(LayerRegistry::Suggest("Convolutoin"), "Convolution");
  EXPECT_EQ(LayerRegistry::Suggest("CompletelyDifferent"), "");
}

}  // namespace
}  // namespace crema
