#pragma once
// Activation memory planning (src/net/README.md): from a built net's static graph, the lifetime
// of every blob's data and diff, and a place (an offset) for each in one arena, where blobs whose
// lifetimes do not overlap may cover the same bytes (greedy by size). A pure function of the net;
// Net applies it (SyncedMemory::View).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/net.hpp"

namespace crema {

struct MemoryPlanLayout {
  struct BlobEntry {
    size_t data_bytes = 0;  // count x element size
    size_t diff_bytes = 0;  // 0 when the mode never touches the diff
    bool has_diff = false;
    int64_t data_offset = -1;  // bytes into the arena, -1 when the blob keeps its own memory
    int64_t diff_offset = -1;
    std::string data_note;  // why the data is not planned ("" when planned)
    std::string diff_note;
  };
  MemoryPlan mode = MemoryPlan::kOff;
  std::vector<BlobEntry> blobs;  // one per net blob, in blob order
  // Bytes of the arena holding every planned data and diff (gradients reuse the bytes of data
  // already read for the last time, and the other way round).
  size_t arena_bytes = 0;
  // Bytes the net's activations occupy without planning (aliases counted once), and those that
  // keep their own memory under the plan; with the plan: kept_data + kept_diff + arena_bytes.
  size_t data_before = 0, diff_before = 0;
  size_t kept_data = 0, kept_diff = 0;
  size_t after() const { return kept_data + kept_diff + arena_bytes; }
  size_t before() const { return data_before + diff_before; }
  // The static part, kept for re-planning after a Reshape: per blob its alias group (the
  // blobs that must share memory), per group its lifetime in steps (forward steps 0..L-1,
  // backward steps L..2L-1) and whether it is planned.
  struct Group {
    std::vector<int> blobs;
    int first = 0, last = -1;
    bool planned = false;
    size_t bytes = 0;     // the largest blob's (set by AssignMemoryBuffers)
    int64_t offset = -1;  // in the arena, when planned
    // Inference: a Concat bottom's group that may live inside its top's group (`parent`, a data
    // group) at the bottom's place in the concatenation: layer `concat`, bottom `bottom`. It does
    // when that place is one contiguous range for the current shapes (nested, set by
    // AssignMemoryBuffers); else it is placed on its own.
    int parent = -1, concat = -1, bottom = -1;
    bool nested = false;
  };
  std::vector<Group> data_groups, diff_groups;
  // Inference: layers whose top was put in their bottom's memory (run in place).
  std::vector<int> in_place_layers;
  // Inference: Concat layers whose bottoms were given places inside their top (Group::parent).
  std::vector<int> concat_in_place_layers;
};

// `mode` kInference: forward only, data buffers are reused once their last consumer ran.
// kTraining: data live until the backward of the last layer that reads it; diffs shared.
// Blobs named in `keep` (and their aliases) keep their own memory. The net must have no plan
// applied (its blobs share memory only as its layers make them share). With `in_place`
// (inference only), a layer that allows in-place computation with one bottom and one top of the
// same size runs in place when both are planned and nothing reads the bottom after it.
// Memory that nets which never run at the same time draw their planned arenas from (the solver's
// test nets run between training iterations, when no train-net activation is live): slot i holds
// the i-th largest buffer of each net (a net asks for one, its arena), sized to the largest
// request. A request larger than its
// slot replaces the slot's memory and bumps generation(); the other nets then re-apply their plan
// at their next full Forward (values in planned buffers do not outlive a Forward anyway).
class SharedActivationMemory {
 public:
  // Memory for buffers of these sizes (bytes), in the order given.
  std::vector<std::shared_ptr<SyncedMemory>> Acquire(const std::vector<size_t>& sizes);
  uint64_t generation() const { return generation_; }
  // Bytes of all slots.
  size_t bytes() const;

 private:
  std::vector<std::shared_ptr<SyncedMemory>> slots_;
  std::vector<size_t> slot_bytes_;
  uint64_t generation_ = 0;
};

MemoryPlanLayout PlanNetMemory(const Net& net, MemoryPlan mode, const std::set<std::string>& keep,
                               bool in_place = true);
// Recomputes sizes, offsets and totals of `layout` from the blobs' current shapes.
void AssignMemoryBuffers(const Net& net, MemoryPlanLayout* layout);

}  // namespace crema
