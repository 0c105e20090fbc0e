#include "net/memory_plan.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace crema {
namespace {

// Layers that point a top's data at the bottom's memory during Forward (found by type, since
// nothing shows it before the first pass); layers that share in LayerSetUp or Reshape (Reshape,
// one-input Concat, one-output Slice) are found by comparing memory pointers.
bool ForwardSharesData(const std::string& type) { return type == "Split" || type == "Flatten"; }
// Flatten's Backward points the bottom's diff at the top's.
bool BackwardSharesDiff(const std::string& type) { return type == "Flatten"; }
// An Eltwise SUM of ones copies its top's diff into each bottom's (cpu::Copy and gpu::Copy skip a
// copy onto itself).
bool BackwardCopiesDiff(const Layer& layer) {
  if (layer.type() != std::string("Eltwise")) return false;
  const EltwiseParameter& param = layer.layer_param().eltwise_param();
  if (param.operation() != EltwiseParameter::SUM) return false;
  for (float coeff : param.coeff())
    if (coeff != 1.f) return false;
  return true;
}
// Layers whose blobs are never planned: Parameter's top is a parameter's memory, and a Python
// layer's code is out of the planner's sight.
bool Opaque(const std::string& type) { return type == "Parameter" || type == "Python"; }

class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int i) { return parent_[i] == i ? i : parent_[i] = Find(parent_[i]); }
  void Join(int a, int b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<int> parent_;
};

// Groups blobs that use one SyncedMemory now (memory_of) or will (extra joins), in blob order.
std::vector<MemoryPlanLayout::Group> Groups(
    UnionFind* sets, int num_blobs,
    const std::function<const std::shared_ptr<SyncedMemory>&(int)>& memory_of) {
  std::map<const SyncedMemory*, int> first_user;
  for (int b = 0; b < num_blobs; ++b) {
    auto [it, inserted] = first_user.emplace(memory_of(b).get(), b);
    if (!inserted) sets->Join(b, it->second);
  }
  std::vector<MemoryPlanLayout::Group> groups;
  std::map<int, int> group_of_root;
  for (int b = 0; b < num_blobs; ++b) {
    auto [it, inserted] = group_of_root.emplace(sets->Find(b), static_cast<int>(groups.size()));
    if (inserted) groups.emplace_back();
    groups[it->second].blobs.push_back(b);
  }
  return groups;
}

// The memory of a group is also held outside the net's blobs (a layer's own blob, a parameter):
// then it cannot move.
bool HeldElsewhere(const MemoryPlanLayout::Group& group, const Net& net,
                   const std::function<const std::shared_ptr<SyncedMemory>&(int)>& memory_of) {
  std::map<const SyncedMemory*, long> refs;
  for (int b = 0; b < static_cast<int>(net.blobs().size()); ++b) ++refs[memory_of(b).get()];
  for (int b : group.blobs)
    if (memory_of(b).use_count() > refs[memory_of(b).get()]) return true;
  return false;
}

// Arena offsets are multiples of this (GPU loads and cuDNN want aligned tensors).
constexpr size_t kAlignment = 256;

size_t Aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Greedy by size (TensorFlow Lite's arena planner): groups from the largest down, each at the
// lowest offset where it overlaps no group already placed whose lifetime shares a step with its
// own. Sets each planned group's offset; returns the arena's size.
size_t PlaceInArena(const std::vector<MemoryPlanLayout::Group*>& groups) {
  std::vector<MemoryPlanLayout::Group*> order;
  for (MemoryPlanLayout::Group* g : groups) {
    g->offset = -1;
    if (g->planned) order.push_back(g);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return a->first < b->first;
  });
  std::vector<const MemoryPlanLayout::Group*> placed;
  size_t arena = 0;
  for (MemoryPlanLayout::Group* g : order) {
    std::vector<std::pair<size_t, size_t>> taken;  // [offset, end) of the groups live with g
    for (const auto* other : placed)
      if (g->first <= other->last && other->first <= g->last)
        taken.emplace_back(other->offset, other->offset + Aligned(other->bytes));
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + Aligned(g->bytes) <= begin) break;
      offset = std::max(offset, end);
    }
    g->offset = static_cast<int64_t>(offset);
    arena = std::max(arena, offset + Aligned(g->bytes));
    placed.push_back(g);
  }
  return arena;
}

// Inference: joins the data group of a layer's top to its (first) bottom's where the layer may
// run in place (AllowsInPlace with one bottom, or AllowsInPlaceOnFirstBottom; one top of the same
// size), both groups are planned, the bottom's group is last touched by this layer and the top's
// first: the layer then overwrites a value nothing reads again.
void RunInPlace(const Net& net, MemoryPlanLayout* layout) {
  std::vector<MemoryPlanLayout::Group>& groups = layout->data_groups;
  std::vector<int> group_of(net.blobs().size(), -1);
  for (int g = 0; g < static_cast<int>(groups.size()); ++g)
    for (int b : groups[g].blobs) group_of[b] = g;
  for (int l = 0; l < net.num_layers(); ++l) {
    const std::vector<int>& bottoms = net.bottom_ids(l);
    const std::vector<int>& tops = net.top_id_vec(l);
    const Layer& layer = *net.layers()[l];
    const bool in_place =
        bottoms.size() == 1 ? layer.AllowsInPlace() : layer.AllowsInPlaceOnFirstBottom();
    if (!in_place || bottoms.empty() || tops.size() != 1) continue;
    const Blob& bottom = *net.blobs()[bottoms[0]];
    const Blob& top = *net.blobs()[tops[0]];
    if (bottom.count() != top.count() || bottom.dtype() != top.dtype()) continue;
    const int gb = group_of[bottoms[0]], gt = group_of[tops[0]];
    MemoryPlanLayout::Group& from = groups[gb];
    MemoryPlanLayout::Group& to = groups[gt];
    if (gb == gt || !from.planned || !to.planned || from.last != l || to.first != l) continue;
    for (int b : to.blobs) {
      from.blobs.push_back(b);
      group_of[b] = gb;
    }
    from.last = to.last;
    to.blobs.clear();
    to.planned = false;
    layout->in_place_layers.push_back(l);
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(),
                              [](const MemoryPlanLayout::Group& g) { return g.blobs.empty(); }),
               groups.end());
}

// The elements before the concatenation axis of a Concat layer's top (1: each bottom is one
// contiguous range of the top, at the sum of the earlier bottoms' counts).
int64_t ConcatOuterCount(const Net& net, int layer) {
  const ConcatParameter& param = net.layers()[layer]->layer_param().concat_param();
  const Blob& top = *net.blobs()[net.top_id_vec(layer)[0]];
  const int axis = top.CanonicalAxisIndex(
      param.has_concat_dim() ? static_cast<int>(param.concat_dim()) : param.axis());
  return top.count(0, axis);
}

// Inference on the CPU: a Concat's bottoms that nothing reads after it may live inside its top,
// each at its place in the concatenation, where that place is contiguous (AssignMemoryBuffers
// checks the shapes: one image, for a channel concatenation): the layers writing the bottoms
// then write the concatenation, and the Concat's copies are copies onto themselves, which
// cpu::Copy skips. SqueezeNet's and GoogLeNet's modules at batch 1. The top's group then lives
// from the first bottom's producer on. (A channel-blocked layout keeps the places: by image,
// channels in blocks of 16 (8), a bottom's channels a whole number of blocks.)
void ConcatInPlace(const Net& net, MemoryPlanLayout* layout) {
  std::vector<MemoryPlanLayout::Group>& groups = layout->data_groups;
  std::vector<int> group_of(net.blobs().size(), -1);
  for (int g = 0; g < static_cast<int>(groups.size()); ++g)
    for (int b : groups[g].blobs) group_of[b] = g;
  std::vector<bool> taken(groups.size(), false);  // a parent or a child already
  for (int l = 0; l < net.num_layers(); ++l) {
    const std::vector<int>& bottoms = net.bottom_ids(l);
    if (net.layers()[l]->type() != std::string("Concat") || bottoms.size() < 2 ||
        net.top_id_vec(l).size() != 1)
      continue;
    const int gt = group_of[net.top_id_vec(l)[0]];
    if (gt < 0 || !groups[gt].planned || groups[gt].first != l || taken[gt]) continue;
    bool fits = true;
    std::set<int> seen;
    for (int b : bottoms) {
      const int g = group_of[b];
      fits = fits && g >= 0 && g != gt && groups[g].planned && groups[g].last == l && !taken[g] &&
             seen.insert(g).second &&
             net.blobs()[b]->dtype() == net.blobs()[net.top_id_vec(l)[0]]->dtype();
      if (!fits) break;
      for (int alias : groups[g].blobs)
        fits = fits && net.blobs()[alias]->count() == net.blobs()[b]->count();
    }
    if (!fits) continue;
    taken[gt] = true;
    for (size_t j = 0; j < bottoms.size(); ++j) {
      MemoryPlanLayout::Group& child = groups[group_of[bottoms[j]]];
      child.parent = gt;
      child.concat = l;
      child.bottom = static_cast<int>(j);
      taken[group_of[bottoms[j]]] = true;
      groups[gt].first = std::min(groups[gt].first, child.first);
    }
    layout->concat_in_place_layers.push_back(l);
  }
}

}  // namespace

MemoryPlanLayout PlanNetMemory(const Net& net, MemoryPlan mode, const std::set<std::string>& keep,
                               bool in_place) {
  MemoryPlanLayout layout;
  layout.mode = mode;
  const int num_blobs = static_cast<int>(net.blobs().size());
  const int num_layers = net.num_layers();
  const bool training = mode == MemoryPlan::kTraining;
  layout.blobs.resize(num_blobs);
  const auto backward_step = [&](int layer) { return 2 * num_layers - 1 - layer; };

  // Who touches each blob, and whether its diff is used at all.
  std::vector<std::vector<int>> touching(num_blobs);
  std::vector<int> producer(num_blobs, -1);
  std::vector<bool> diff_read(num_blobs, false), diff_written(num_blobs, false);
  std::vector<bool> diff_unwritten(num_blobs, false);  // a consumer leaves it as it is
  for (int l = 0; l < num_layers; ++l) {
    const std::vector<int>& bottoms = net.bottom_ids(l);
    for (size_t j = 0; j < bottoms.size(); ++j) {
      const int b = bottoms[j];
      touching[b].push_back(l);
      if (net.layer_need_backward()[l] && net.bottom_need_backward()[l][j])
        diff_written[b] = true;
      else
        diff_unwritten[b] = true;
    }
    for (int b : net.top_id_vec(l)) {
      touching[b].push_back(l);
      if (producer[b] < 0) producer[b] = l;
      if (net.layer_need_backward()[l]) diff_read[b] = true;
    }
  }
  // Inference: a depthwise convolution computed by the 1x1 convolution before it
  // (Net::depthwise_fused_into) writes its top during that convolution's step, while that reads
  // its input, so the top lives from there.
  if (mode == MemoryPlan::kInference)
    for (int l = 0; l < num_layers; ++l)
      if (const int by = net.depthwise_fused_into()[l]; by >= 0)
        for (int b : net.top_id_vec(l))
          touching[b].insert(std::lower_bound(touching[b].begin(), touching[b].end(), by), by);
  std::vector<bool> is_output(num_blobs, false);
  for (int b : net.output_blob_indices()) is_output[b] = true;

  // Why a blob's data (and diff) cannot move; "" when it can.
  std::vector<std::string> data_note(num_blobs), diff_note(num_blobs);
  for (int b = 0; b < num_blobs; ++b) {
    const Blob& blob = *net.blobs()[b];
    std::string note;
    if (producer[b] >= 0 && net.bottom_ids(producer[b]).empty())
      note = "net input";
    else if (is_output[b])
      note = "net output";
    else if (net.blob_loss_weights()[b] != 0)
      note = "loss";
    else if (keep.count(net.blob_names()[b]))
      note = "kept";
    else if (blob.count() == 0)
      note = "empty";
    for (int l : touching[b])
      if (note.empty() && Opaque(net.layers()[l]->type()))
        note = StrCat(net.layers()[l]->type(), " layer");
    data_note[b] = diff_note[b] = note;
    if (!training)
      diff_note[b] = "inference";
    else if (diff_note[b].empty() && diff_read[b] && diff_unwritten[b])
      diff_note[b] = "a consumer does not write its gradient";
  }

  UnionFind data_sets(num_blobs), diff_sets(num_blobs);
  for (int l = 0; l < num_layers; ++l) {
    const std::string type = net.layers()[l]->type();
    const std::vector<int>& bottoms = net.bottom_ids(l);
    if (bottoms.empty()) continue;
    // A layer folded into a convolution (Net::folded_into) is skipped: its top aliases its
    // bottom.
    const bool folded = net.folded_into()[l] >= 0;
    for (int t : net.top_id_vec(l)) {
      if (ForwardSharesData(type) || folded) data_sets.Join(t, bottoms[0]);
      if (BackwardSharesDiff(type)) diff_sets.Join(t, bottoms[0]);
    }
    // Training: a layer whose Backward copies its top's diff into a bottom's can have the two in
    // one buffer (the copy then does nothing), one bottom of them, where that is safe: the
    // layer is the last to touch the bottom and the first to touch its top, so the top's diff
    // is complete before the layer's Backward and read by no one after it, and the bottom's is
    // written by no one before it (the layers that write it, its producer and the in-place
    // layers on it, run their Backward later). ResNet's shortcut sums: one copy of two less.
    if (training && net.layer_need_backward()[l] && BackwardCopiesDiff(*net.layers()[l]) &&
        net.top_id_vec(l).size() == 1) {
      const int t = net.top_id_vec(l)[0];
      const std::set<int> distinct(bottoms.begin(), bottoms.end());
      const Blob& top = *net.blobs()[t];
      if (distinct.size() == bottoms.size() && !distinct.count(t) && touching[t].front() == l) {
        for (size_t j = bottoms.size(); j-- > 0;) {
          const int b = bottoms[j];
          const Blob& bottom = *net.blobs()[b];
          if (net.bottom_need_backward()[l][j] && touching[b].back() == l &&
              bottom.dtype() == top.dtype() && bottom.count() == top.count()) {
            diff_sets.Join(t, b);
            break;
          }
        }
      }
    }
  }
  const auto data_of = [&](int b) -> const std::shared_ptr<SyncedMemory>& {
    return net.blobs()[b]->data();
  };
  const auto diff_of = [&](int b) -> const std::shared_ptr<SyncedMemory>& {
    return net.blobs()[b]->diff();
  };
  layout.data_groups = Groups(&data_sets, num_blobs, data_of);
  layout.diff_groups = Groups(&diff_sets, num_blobs, diff_of);

  // A group is planned when none of its blobs says otherwise; its lifetime spans every step
  // that touches one of its blobs (in training, a layer's backward touches its tops and bottoms,
  // and every layer's counts, as `crema time` runs them all).
  const auto settle = [&](MemoryPlanLayout::Group& group, std::vector<std::string>& notes,
                          bool forward, bool backward, const std::string& held_note) {
    std::string reason;
    for (int b : group.blobs)
      if (!notes[b].empty()) reason = notes[b];
    if (reason.empty() && !held_note.empty()) reason = held_note;
    group.first = 2 * num_layers;
    group.last = -1;
    for (int b : group.blobs)
      for (int l : touching[b]) {
        if (forward) group.first = std::min(group.first, l), group.last = std::max(group.last, l);
        if (backward) {
          group.first = std::min(group.first, backward_step(l));
          group.last = std::max(group.last, backward_step(l));
        }
      }
    group.planned = reason.empty() && group.last >= 0;
    for (int b : group.blobs) {
      if (notes[b].empty() && !group.planned)
        notes[b] = reason.empty() ? "unused" : StrCat(reason, " (alias)");
    }
  };
  for (auto& group : layout.data_groups)
    settle(group, data_note, true, training,
           HeldElsewhere(group, net, data_of) ? "held by a layer" : "");
  if (mode == MemoryPlan::kInference && in_place) RunInPlace(net, &layout);
  if (mode == MemoryPlan::kInference && net.device().is_cpu()) ConcatInPlace(net, &layout);
  for (auto& group : layout.diff_groups) {
    bool used = false;
    for (int b : group.blobs) used |= diff_read[b] || diff_written[b];
    for (int b : group.blobs) {
      // The loss weight lives in a loss top's diff; otherwise diffs exist where backward runs.
      layout.blobs[b].has_diff = net.blob_loss_weights()[b] != 0 || (training && used);
      if (training && !used && diff_note[b].empty()) diff_note[b] = "no gradient";
    }
    settle(group, diff_note, false, true,
           HeldElsewhere(group, net, diff_of) ? "held by a layer" : "");
  }
  for (int b = 0; b < num_blobs; ++b) {
    layout.blobs[b].data_note = data_note[b];
    layout.blobs[b].diff_note = diff_note[b];
  }
  AssignMemoryBuffers(net, &layout);
  return layout;
}

std::vector<std::shared_ptr<SyncedMemory>> SharedActivationMemory::Acquire(
    const std::vector<size_t>& sizes) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::shared_ptr<SyncedMemory>> memory(sizes.size());
  for (size_t slot = 0; slot < order.size(); ++slot) {
    const size_t bytes = sizes[order[slot]];
    if (slot == slots_.size()) {
      slots_.push_back(nullptr);
      slot_bytes_.push_back(0);
    }
    if (!slots_[slot] || slot_bytes_[slot] < bytes) {
      if (slots_[slot]) ++generation_;  // nets placed in the old memory must move
      slots_[slot] = std::make_shared<SyncedMemory>(bytes);
      slot_bytes_[slot] = bytes;
    }
    memory[order[slot]] = slots_[slot];
  }
  return memory;
}

size_t SharedActivationMemory::bytes() const {
  return std::accumulate(slot_bytes_.begin(), slot_bytes_.end(), size_t{0});
}

void AssignMemoryBuffers(const Net& net, MemoryPlanLayout* layout) {
  const int num_blobs = static_cast<int>(net.blobs().size());
  std::vector<size_t> data_bytes(num_blobs), diff_bytes(num_blobs);
  for (int b = 0; b < num_blobs; ++b) {
    const Blob& blob = *net.blobs()[b];
    MemoryPlanLayout::BlobEntry& entry = layout->blobs[b];
    entry.data_bytes = data_bytes[b] = static_cast<size_t>(blob.count()) * SizeOf(blob.dtype());
    // Diffs exist where backward uses them, and for loss tops (the loss weight lives there).
    entry.diff_bytes = diff_bytes[b] = entry.has_diff ? data_bytes[b] : 0;
  }
  // Data and diff groups share the arena.
  std::vector<MemoryPlanLayout::Group*> groups;
  layout->data_before = layout->diff_before = layout->kept_data = layout->kept_diff = 0;
  for (auto* kind : {&layout->data_groups, &layout->diff_groups}) {
    const bool data = kind == &layout->data_groups;
    for (MemoryPlanLayout::Group& group : *kind) {
      group.bytes = 0;
      for (int b : group.blobs)
        group.bytes = std::max(group.bytes, data ? data_bytes[b] : diff_bytes[b]);
      (data ? layout->data_before : layout->diff_before) += group.bytes;
      if (!group.planned) (data ? layout->kept_data : layout->kept_diff) += group.bytes;
      groups.push_back(&group);
    }
  }
  // Concat bottoms inside their top where their places are contiguous for these shapes.
  std::vector<int64_t> nested_at(layout->data_groups.size(), -1);
  for (size_t g = 0; g < layout->data_groups.size(); ++g) {
    MemoryPlanLayout::Group& group = layout->data_groups[g];
    group.nested = false;
    if (group.parent < 0 || ConcatOuterCount(net, group.concat) != 1) continue;
    const std::vector<int>& bottoms = net.bottom_ids(group.concat);
    size_t at = 0;
    for (int j = 0; j < group.bottom; ++j) at += data_bytes[bottoms[j]];
    group.nested = true;
    nested_at[g] = static_cast<int64_t>(at);
  }
  std::vector<MemoryPlanLayout::Group*> placed;
  for (MemoryPlanLayout::Group* group : groups)
    if (!group->nested) placed.push_back(group);
  layout->arena_bytes = PlaceInArena(placed);
  for (size_t g = 0; g < layout->data_groups.size(); ++g) {
    MemoryPlanLayout::Group& group = layout->data_groups[g];
    if (group.nested) group.offset = layout->data_groups[group.parent].offset + nested_at[g];
  }
  for (auto* kind : {&layout->data_groups, &layout->diff_groups})
    for (const MemoryPlanLayout::Group& group : *kind)
      for (int b : group.blobs)
        (kind == &layout->data_groups ? layout->blobs[b].data_offset
                                      : layout->blobs[b].diff_offset) = group.offset;
}

}  // namespace crema
