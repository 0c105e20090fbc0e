#include "net/net_json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
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

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    return std::string(buf) == "-0" ? "0" : buf;
  }
  char buf[40];
  // Loss weights and the like are floats: the shortest text that reads back as the same float.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (precision >= 9 ? std::strtod(buf, nullptr) == value
                       : std::strtof(buf, nullptr) == static_cast<float>(value))
      break;
  }
  return buf;
}

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
