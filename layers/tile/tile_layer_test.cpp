#include "layers/tile/tile_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(Tile, LayerCase("tile_param { tiles: 3 }", {{2, 3, 2}}).Name("channels"),
                        LayerCase("tile_param { axis: 0 tiles: 2 }", {{2, 3}}).Name("axis0"),
                        LayerCase("tile_param { axis: -1 tiles: 4 }", {{2, 2, 3}}).Name("last"),
                        LayerCase("tile_param { tiles: 1 }", {{2, 3}}).Name("one_tile"));

namespace crema::testing {
namespace {

TEST(TileValues, MatchNaive) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (int axis : {0, 1, 2}) {
      const int tiles = 3;
      auto layer =
          CreateLayer(StrCat("type: 'Tile' tile_param { axis: ", axis, " tiles: 3 }"), dtype);
      const std::vector<int> shape = {2, 3, 4};
      Blob bottom(shape, dtype), top(dtype);
      FillUniform(&bottom, -1, 1);
      layer->SetUp({&bottom}, {&top});
      layer->Forward({&bottom}, {&top});
      std::vector<int> top_shape = shape;
      top_shape[axis] *= tiles;
      ASSERT_EQ(top.shape(), top_shape);
      // top[o, t * d + i, r] = bottom[o, i, r] with d the axis size.
      const int64_t outer = bottom.count(0, axis), inner = bottom.count(axis + 1);
      const int d = shape[axis];
      for (int64_t o = 0; o < outer; ++o)
        for (int t = 0; t < tiles; ++t)
          for (int i = 0; i < d; ++i)
            for (int64_t r = 0; r < inner; ++r)
              ASSERT_EQ(top.data_at(((o * tiles + t) * d + i) * inner + r),
                        bottom.data_at((o * d + i) * inner + r));
      // Backward: the sum over tiles.
      std::vector<double> dy(top.count());
      for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<double>(i % 7) - 3;
      SetDiffOf(&top, dy);
      layer->Backward({&top}, {true}, {&bottom});
      for (int64_t o = 0; o < outer; ++o)
        for (int i = 0; i < d; ++i)
          for (int64_t r = 0; r < inner; ++r) {
            double sum = 0;
            for (int t = 0; t < tiles; ++t) sum += dy[((o * tiles + t) * d + i) * inner + r];
            ASSERT_EQ(bottom.diff_at((o * d + i) * inner + r), sum);
          }
    }
  }
}

TEST(TileValues, ByHand) {
  auto layer = CreateLayer("type: 'Tile' tile_param { tiles: 2 }");
  auto bottom = MakeBlob({2, 2}, {1, 2, 3, 4});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4}));
  SetDiffOf(&top, {1, 2, 10, 20, 3, 4, 30, 40});
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{11, 22, 33, 44}));
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Tile' " + param);
  auto bottom = MakeBlob({2, 3}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Tile)"), std::string::npos) << e.what();
  }
}

TEST(TileErrors, Messages) {
  ExpectError("", "tile_param.tiles");
  ExpectError("tile_param { tiles: 0 }", "tile_param.tiles");
  ExpectError("tile_param { tiles: -2 }", "tile_param.tiles");
  ExpectError("tile_param { tiles: 2 axis: 2 }", "tile_param.axis");
  ExpectError("tile_param { tiles: 2 axis: -3 }", "tile_param.axis");
}

TEST(TileCaffe, LayerZoo) { CheckLayerAgainstCaffe("layer_zoo", "tile"); }

}  // namespace
}  // namespace crema::testing
