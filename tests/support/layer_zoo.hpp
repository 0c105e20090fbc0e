#pragma once
// Running single layers against BVLC Caffe's numeric dumps (../shared/reference/bvlc/numeric/
// <net>, e.g. layer_zoo, layer_zoo_aux: <net>.caffemodel, manifest.json, fwd/ bwd/ grad/ files).
// Four entry points, by how much the test spells out:
//   CheckLayerAgainstCaffe  everything from manifest.json (bottoms, top diffs, what to check);
//   RunZooCase              one top; bottoms, top diff and checked files named by the test;
//                           returns the layer for further checks;
//   CheckLayerZoo           several tops (losses carry their loss weights), optional param edit;
//   ExpectMatchesCaffe      one bottom and one top of a known shape (neuron layers).
// All compare within 2e-5 (CheckLayerAgainstCaffe: `tolerance`) times the largest magnitude of
// the reference (at least 1e-3).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crema/blob.hpp"
#include "crema/layer.hpp"

namespace crema::testing {

// Compares the data (or diff) of `actual` with Caffe's float32 `expected`. Size mismatch is a
// fatal failure; mismatching elements are reported until `max_failures` (0: all) have been.
void ExpectNearCaffe(const Blob& actual, bool diff, const std::vector<float>& expected,
                     double tolerance, const std::string& what, int max_failures);

// Runs layer `layer_name` of bvlc/numeric/<net_name> by itself and compares it with Caffe. The
// layer's parameter and learnable blobs come from <net>.caffemodel (which names the
// auto-inserted Split blobs); each bottom from the dump of the last layer that wrote that blob
// before it (following Splits back to their source); each top diff from the bottom diff dumped
// by the next layer that consumed the top, else the loss weight, else zero. Checked: every
// dumped top, bottom diff and param diff of the layer. Skips when the data is absent.
void CheckLayerAgainstCaffe(const std::string& net_name, const std::string& layer_name,
                            double tolerance = 2e-5);

// ---- layer_zoo cases spelled out file by file (dir: the layer_zoo folder) ----

// The layer called `name` in layer_zoo.caffemodel (parameters and blobs as Caffe saved them).
LayerParameter ZooLayer(const std::string& dir, const std::string& name);
// A float32 blob of `shape` holding the dump at `path`.
std::unique_ptr<Blob> LoadF32(const std::string& path, const std::vector<int>& shape);
// Caffe's float32 values vs ours (at most 5 mismatches reported).
void ExpectNearRef(const Blob& actual, const std::string& path, bool diff);

struct ZooCase {
  std::string layer;
  std::vector<std::pair<std::string, std::vector<int>>> bottoms;  // fwd/ or inputs/ files
  std::string top;                                                // fwd/ file of top[0]
  std::string top_diff;                                           // bwd/ file holding top[0]'s diff
  std::vector<std::string> bottom_diffs;  // bwd/ files, one per bottom ("" = not checked)
  std::vector<std::string> param_diffs;   // grad/ files, one per learned blob
};

// Runs one layer of layer_zoo on Caffe's inputs and compares forward, bottom and param diffs.
// Returns the layer so that callers can check more (e.g. BatchNorm's statistics).
std::unique_ptr<Layer> RunZooCase(const std::string& dir, const ZooCase& c);

struct ZooBlob {
  std::string file;  // relative to the layer_zoo folder
  std::vector<int> shape;
};

// Caffe's float32 values vs ours (every mismatch reported).
void ExpectNearZoo(const Blob& actual, const std::string& path, bool diff);

// Builds layer `name` from layer_zoo.caffemodel (its parameter and weights), feeds it Caffe's
// bottoms, and compares its tops, bottom diffs (empty file: not propagated) and param diffs.
// Without top_diffs the tops are losses and carry their loss weights.
void CheckLayerZoo(const std::string& dir, const std::string& name,
                   const std::vector<ZooBlob>& bottoms, const std::vector<std::string>& tops,
                   const std::vector<std::string>& top_diffs,
                   const std::vector<std::string>& bottom_diffs,
                   const std::vector<std::string>& param_diffs,
                   const std::function<void(LayerParameter*)>& edit = nullptr);

// BVLC Caffe's outputs for one layer of a reference net (bvlc/numeric/<net>): the layer is built
// from the net's .caffemodel (weights included), run on the dumped bottom, and its top, bottom
// diff and param diffs compared with Caffe's. Empty file names skip that part.
struct CaffeDump {
  std::string net;
  std::string layer;
  std::vector<int> shape;  // bottom and top
  std::string bottom;      // relative to the net's folder, like the rest
  std::string top;
  std::string top_diff;
  std::string bottom_diff;
  std::vector<std::string> param_diffs;
};

// Skips when the data is absent; the first mismatch of each compared blob is fatal to it.
void ExpectMatchesCaffe(const CaffeDump& d);

}  // namespace crema::testing
