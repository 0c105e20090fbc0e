// Channel-blocked layouts between the oneDNN layers of a net (NetOptions::channel_blocked,
// src/net/README.md). oneDNN's convolutions work in a channel-blocked layout (nChw16c with
// AVX-512, nChw8c with AVX2); with crema's plain NCHW blobs each oneDNN layer reorders its input
// in and its output out. Here a planned blob that only layers able to take the blocked layout
// read is written blocked by its oneDNN producer and read as it is by the next one; in a net
// that trains, its gradient likewise, backward. Which layout a blob's data or gradient holds is a
// tag on the memory (SyncedMemory::channel_block), set by whoever writes it: the oneDNN layers
// for what they write; the net for the other layers' outputs (pass-through layers compute
// elementwise, so blocked inputs give blocked outputs; any other layer's are plain). Before a
// layer that cannot read a blocked input, the net puts that input back to plain in place (what
// the layer's own reorder cost before).
#include <atomic>

#include "crema/net.hpp"
#include "layers/batch_norm/batch_norm_layer.hpp"
#include "layers/scale/scale_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "net/memory_plan.hpp"

namespace crema {
namespace {

std::atomic<bool> g_channel_blocked_default{true};

bool SameMemory(const Blob& a, const Blob& b) { return a.data() && a.data() == b.data(); }

bool SharesBottomMemory(const Blob& top, const BlobVec& bottom) {
  for (const Blob* b : bottom)
    if (SameMemory(top, *b)) return true;
  return false;
}

bool SharesTopDiff(const Blob& bottom, const BlobVec& top) {
  for (const Blob* t : top)
    if (bottom.diff() && bottom.diff() == t->diff()) return true;
  return false;
}

// The blob's data (or gradient) put back to plain in place, where it is blocked.
void ToPlain(Blob* blob, bool diff, Workspace* ws) {
  SyncedMemory* memory = diff ? blob->diff().get() : blob->data().get();
  if (memory == nullptr || memory->channel_block() == 0) return;
  ChannelBlockedToPlain(blob->shape(), memory->channel_block(),
                        diff ? blob->mutable_cpu_diff<float>() : blob->mutable_cpu_data<float>(),
                        ws);
  memory->set_channel_block(0);
}

}  // namespace

void SetChannelBlockedDefault(bool blocked) { g_channel_blocked_default.store(blocked); }
bool ChannelBlockedDefault() { return g_channel_blocked_default.load(); }

void Net::SetChannelBlocked(bool blocked) {
  channel_blocked_ = blocked;
  // Turned off: values left blocked by earlier passes go back to plain now (no layer will).
  PlanChannelBlocked();
  if (!channel_blocked_active_)
    for (const BlobPtr& blob : blobs_) {
      ToPlain(blob.get(), false, workspace_.get());
      ToPlain(blob.get(), true, workspace_.get());
    }
}

void Net::PlanChannelBlocked() {
  for (const BlobPtr& blob : blobs_) blob->set_channel_block_allowed(false);
  channel_blocked_active_ = false;
  channel_block_arrives_.assign(blobs_.size(), 0);
  // (The layer's own choice; a folded copy made later takes it over, Net::ApplyFold.)
  const auto set_crema_races = [&](int l, bool on) {
    Layer* folded = l < static_cast<int>(folded_convs_.size()) ? folded_convs_[l].get() : nullptr;
    for (Layer* layer : {layers_[l].get(), folded})
      if (CpuEngineChoice* choice = layer ? layer->cpu_engine_choice() : nullptr)
        choice->set_crema_races(on);
  };
  for (int l = 0; l < num_layers(); ++l) set_crema_races(l, true);
  const bool training = memory_plan_ == MemoryPlan::kTraining;
  if (!channel_blocked_ || !memory_layout_ ||
      (memory_plan_ != MemoryPlan::kInference && !training) || !device_.is_cpu() ||
      amp_ != Amp::kOff || ChannelBlock() == 0)
    return;
  const int num_blobs = static_cast<int>(blobs_.size());
  std::vector<char> allowed(num_blobs, 0);
  for (int b = 0; b < num_blobs; ++b)
    allowed[b] = memory_layout_->blobs[b].data_note.empty() &&
                 (!training || memory_layout_->blobs[b].diff_note.empty()) &&
                 blobs_[b]->dtype() == DataType::kFloat32 && ChannelBlockable(blobs_[b]->shape());
  // How layer l takes blocked values. BatchNorm and Scale take them as a BatchNorm group only
  // (the BatchNorm computing both: BatchNormLayer::ReadsChannelBlocked); alone, plain.
  const auto use_of = [&](int l) {
    if (folded_into_[l] >= 0) return Layer::ChannelBlocking::kPassThrough;
    const Layer* layer = layers_[l].get();
    const int bn = fused_into_batch_norm_[l];
    const bool grouped = group_scale_of_[l] >= 0 || (bn >= 0 && group_scale_of_[bn] == l);
    if (!grouped && (dynamic_cast<const BatchNormLayer*>(layer) != nullptr ||
                     dynamic_cast<const ScaleLayer*>(layer) != nullptr))
      return Layer::ChannelBlocking::kNone;
    return layer->channel_blocking();
  };
  // A blob stays allowed while every layer reading it takes the blocked layout (forward and, in
  // training, backward: the layers that read its data write its gradient); a pass-through
  // reader (and a layer folded into a convolution, whose top aliases its bottom) also needs its
  // tops allowed, since it leaves them blocked.
  for (bool changed = true; changed;) {
    changed = false;
    for (int l = 0; l < num_layers(); ++l) {
      const Layer::ChannelBlocking use = use_of(l);
      bool tops_allowed = true;
      for (int t : top_id_vecs_[l]) tops_allowed = tops_allowed && allowed[t];
      const bool takes = use == Layer::ChannelBlocking::kEngine ||
                         (use == Layer::ChannelBlocking::kPassThrough && tops_allowed);
      for (int b : bottom_id_vecs_[l])
        if (allowed[b] && !takes) {
          allowed[b] = 0;
          changed = true;
        }
    }
  }
  for (int b = 0; b < num_blobs; ++b) {
    blobs_[b]->set_channel_block_allowed(allowed[b] != 0);
    channel_blocked_active_ = channel_blocked_active_ || allowed[b];
  }
  // A layer whose input arrives blocked or whose output would be read blocked races oneDNN's
  // kernels only (CpuEngineChoice::set_crema_races): crema's would cost a conversion its race
  // misses. What arrives blocked: an allowed top of a oneDNN layer (of a pooling, only from
  // blocked bottoms: Layer::ChannelBlockedOnlyFromBlocked), and the tops of a pass-through layer
  // whose bottoms all arrive blocked and whose tops are all allowed (a Split with one plain
  // reader passes on plain data). (Before BatchNorm groups took blocked values, ResNet-50's
  // pool1 read a group's plain output in training; had it written its top blocked, the two
  // convolutions after it would have run oneDNN's kernels only, where crema's won their races,
  // 1.04x slower iterations. Now its chain runs from conv1 through the groups, blocked.)
  std::vector<char>& arrives = channel_block_arrives_;
  for (int l = 0; l < num_layers(); ++l) {
    const Layer::ChannelBlocking use = use_of(l);
    const bool from_blocked =
        use == Layer::ChannelBlocking::kEngine && layers_[l]->ChannelBlockedOnlyFromBlocked();
    bool bottoms_blocked = !bottom_id_vecs_[l].empty(), tops_allowed = true, chained = false;
    for (int b : bottom_id_vecs_[l]) {
      bottoms_blocked = bottoms_blocked && arrives[b];
      chained = chained || arrives[b];
    }
    for (int t : top_id_vecs_[l]) {
      tops_allowed = tops_allowed && allowed[t];
      chained = chained || (allowed[t] && !from_blocked);
    }
    for (int t : top_id_vecs_[l]) {
      if (use == Layer::ChannelBlocking::kEngine)
        arrives[t] = allowed[t] && (!from_blocked || bottoms_blocked);
      if (use == Layer::ChannelBlocking::kPassThrough)
        arrives[t] = arrives[t] || (bottoms_blocked && tops_allowed);
    }
    if (use == Layer::ChannelBlocking::kEngine && chained) set_crema_races(l, false);
  }
}

void Net::ChannelBlockedBefore(int layer_id, Layer* layer) {
  const BlobVec& bottom = layer_bottoms_[layer_id];
  const BlobVec& top = layer_tops_[layer_id];
  const Layer::ChannelBlocking use = layer->channel_blocking();
  int block = 0;
  bool all_blocked = !bottom.empty();
  for (const Blob* b : bottom) {
    const int k = b->cpu_channel_block();
    all_blocked = all_blocked && k > 0 && (block == 0 || k == block);
    if (k > 0) block = k;
  }
  bool reads_blocked = false;
  if (use == Layer::ChannelBlocking::kPassThrough) {
    reads_blocked = all_blocked;
    for (const Blob* t : top)
      reads_blocked = reads_blocked && (t->channel_block_allowed() || SameMemory(*t, *bottom[0]));
  } else if (use == Layer::ChannelBlocking::kEngine && block > 0) {
    reads_blocked = layer->ReadsChannelBlocked(bottom, top);
  }
  if (!reads_blocked)
    for (Blob* b : bottom) ToPlain(b, false, workspace_.get());
  // Tops with memory apart from the bottoms' are plain until written otherwise: the oneDNN layers
  // tag what they write blocked, and ChannelBlockedAfter tags a pass-through layer's tops.
  channel_block_written_ = use == Layer::ChannelBlocking::kPassThrough && reads_blocked ? block : 0;
  for (Blob* t : top)
    if (!SharesBottomMemory(*t, bottom) && t->data()) t->data()->set_channel_block(0);
}

void Net::ChannelBlockedAfter(int layer_id) {
  if (channel_block_written_ == 0) return;
  const BlobVec& bottom = layer_bottoms_[layer_id];
  for (Blob* t : layer_tops_[layer_id])
    if (!SharesBottomMemory(*t, bottom)) t->data()->set_channel_block(channel_block_written_);
}

void Net::ChannelBlockedBackwardBefore(int layer_id, Layer* layer) {
  const BlobVec& bottom = layer_bottoms_[layer_id];
  const BlobVec& top = layer_tops_[layer_id];
  const Layer::ChannelBlocking use = layer->channel_blocking();
  bool reads_blocked = false;
  int block = 0;
  if (use == Layer::ChannelBlocking::kPassThrough) {
    // It computes on the top gradients, the tops and the bottoms alike (ReLU's gradient reads its
    // output, Eltwise PROD its inputs, a fused ReLU gradient the bottom): all blocked the same.
    block = top.empty() ? 0 : top[0]->cpu_diff_channel_block();
    reads_blocked = block > 0;
    for (const Blob* t : top)
      reads_blocked =
          reads_blocked && t->cpu_diff_channel_block() == block && t->cpu_channel_block() == block;
    for (const Blob* b : bottom)
      reads_blocked =
          reads_blocked && b->cpu_channel_block() == block && b->channel_block_allowed();
  } else if (use == Layer::ChannelBlocking::kEngine) {
    reads_blocked = layer->BackwardReadsChannelBlocked(top, bottom);
  }
  if (!reads_blocked) {
    for (Blob* t : top) {
      ToPlain(t, true, workspace_.get());
      ToPlain(t, false, workspace_.get());
    }
    for (Blob* b : bottom) ToPlain(b, false, workspace_.get());
  }
  // Bottom gradients apart from the tops' are plain until written otherwise (the oneDNN layers
  // tag theirs, ChannelBlockedBackwardAfter a pass-through layer's).
  channel_block_written_ = use == Layer::ChannelBlocking::kPassThrough && reads_blocked ? block : 0;
  for (Blob* b : bottom)
    if (!SharesTopDiff(*b, top) && b->diff()) b->diff()->set_channel_block(0);
}

void Net::ChannelBlockedBackwardAfter(int layer_id) {
  if (channel_block_written_ == 0) return;
  const BlobVec& top = layer_tops_[layer_id];
  for (Blob* b : layer_bottoms_[layer_id])
    if (!SharesTopDiff(*b, top)) b->diff()->set_channel_block(channel_block_written_);
}

}  // namespace crema
