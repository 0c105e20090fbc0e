#include "net/net_json.hpp"

#include <sstream>

namespace crema {
namespace {

std::string StringList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + JsonQuote(items[i]);
  return out + "]";
}

std::string Shape(const std::vector<int>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string BlobNames(const Net& net, const std::vector<int>& ids) {
  std::vector<std::string> names;
  for (int id : ids) names.push_back(net.blob_names()[id]);
  return StringList(names);
}

}  // namespace

std::string NetToJson(const Net& net, const std::vector<std::string>& stages) {
  std::ostringstream os;
  os << "{\n";
  os << "  \"net_name\": " << JsonQuote(net.name()) << ",\n";
  os << "  \"phase\": " << JsonQuote(net.phase() == TRAIN ? "TRAIN" : "TEST") << ",\n";
  os << "  \"stages\": " << StringList(stages) << ",\n";
  os << "  \"layers\": [\n";
  for (int i = 0; i < net.num_layers(); ++i) {
    const Layer& layer = *net.layers()[i];
    std::string top_shapes = "[", param_shapes = "[", loss_weights = "[";
    for (size_t j = 0; j < net.top_vecs()[i].size(); ++j) {
      top_shapes += (j ? "," : "") + Shape(net.top_vecs()[i][j]->shape());
      loss_weights += (j ? "," : "") + JsonNumber(layer.loss(static_cast<int>(j)));
    }
    for (size_t j = 0; j < layer.blobs().size(); ++j)
      param_shapes += (j ? "," : "") + Shape(layer.blobs()[j]->shape());
    os << "    {\"index\": " << i << ", \"name\": " << JsonQuote(net.layer_names()[i])
       << ", \"type\": " << JsonQuote(layer.type())
       << ", \"bottoms\": " << BlobNames(net, net.bottom_ids(i))
       << ", \"tops\": " << BlobNames(net, net.top_id_vec(i)) << ", \"top_shapes\": " << top_shapes
       << "]"
       << ", \"param_shapes\": " << param_shapes << "]"
       << ", \"loss_weights\": " << loss_weights << "]}"
       << (i + 1 < net.num_layers() ? ",\n" : "\n");
  }
  os << "  ],\n";
  os << "  \"blobs\": [\n";
  for (size_t i = 0; i < net.blobs().size(); ++i) {
    os << "    {\"name\": " << JsonQuote(net.blob_names()[i])
       << ", \"shape\": " << Shape(net.blobs()[i]->shape()) << "}"
       << (i + 1 < net.blobs().size() ? ",\n" : "\n");
  }
  os << "  ],\n";
  os << "  \"input_blobs\": " << BlobNames(net, net.input_blob_indices()) << ",\n";
  os << "  \"output_blobs\": " << BlobNames(net, net.output_blob_indices()) << ",\n";
  int64_t total = 0, unique = 0;
  for (size_t i = 0; i < net.params().size(); ++i) {
    total += net.params()[i]->count();
    if (i >= net.param_owners().size() || net.param_owners()[i] < 0)
      unique += net.params()[i]->count();
  }
  os << "  \"num_learnable_params\": " << total << ",\n";
  os << "  \"num_learnable_params_unique\": " << unique << "\n";
  os << "}\n";
  return os.str();
}

}  // namespace crema
