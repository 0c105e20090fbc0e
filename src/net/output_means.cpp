#include "net/output_means.hpp"

#include <algorithm>

namespace crema {

void OutputMeans::Add(const Net& net) {
  const BlobVec& blobs = net.output_blobs();
  if (passes_ == 0) {
    outputs_.resize(blobs.size());
    for (size_t j = 0; j < blobs.size(); ++j) {
      Output& out = outputs_[j];
      out.name = net.blob_names()[net.output_blob_indices()[j]];
      out.first_count = out.min_count = out.max_count = blobs[j]->count();
      out.sums.assign(static_cast<size_t>(blobs[j]->count()), 0.0);
    }
  }
  CREMA_ASSERT(blobs.size() == outputs_.size(), "the net's outputs changed");
  for (size_t j = 0; j < blobs.size(); ++j) {
    Output& out = outputs_[j];
    const int64_t count = blobs[j]->count();
    out.min_count = std::min(out.min_count, count);
    out.max_count = std::max(out.max_count, count);
    out.total_count += count;
    if (count != out.first_count) {
      out.varies = true;
      out.sums.clear();
    }
    if (out.varies) continue;
    for (int64_t k = 0; k < count; ++k) out.sums[static_cast<size_t>(k)] += blobs[j]->data_at(k);
  }
  ++passes_;
}

std::vector<OutputMeans::Mean> OutputMeans::Means() const {
  std::vector<Mean> means;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    if (outputs_[j].varies) continue;
    for (double sum : outputs_[j].sums)
      means.push_back({outputs_[j].name, static_cast<int>(j), sum / passes_});
  }
  return means;
}

std::vector<OutputMeans::Varying> OutputMeans::VaryingOutputs() const {
  std::vector<Varying> varying;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    const Output& out = outputs_[j];
    if (out.varies)
      varying.push_back(
          {out.name, static_cast<int>(j), out.min_count, out.max_count, out.total_count});
  }
  return varying;
}

}  // namespace crema
