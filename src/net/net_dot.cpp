#include "net/net_dot.hpp"

#include <map>
#include <sstream>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"

namespace crema {
namespace {

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Dims(const google::protobuf::RepeatedField<uint32_t>& values, uint32_t h, uint32_t w,
                 bool has_hw, uint32_t fallback) {
  if (has_hw) return std::to_string(h) + "x" + std::to_string(w);
  if (values.size() > 0) return std::to_string(values.Get(0));
  return std::to_string(fallback);
}

// The second line of a layer's label: its shape-defining parameters.
std::string LayerDetail(const LayerParameter& layer) {
  std::ostringstream os;
  if (layer.type() == "Convolution" || layer.type() == "Deconvolution") {
    const ConvolutionParameter& p = layer.convolution_param();
    os << "num_output " << p.num_output() << ", kernel "
       << Dims(p.kernel_size(), p.kernel_h(), p.kernel_w(), p.has_kernel_h(), 1) << ", stride "
       << Dims(p.stride(), p.stride_h(), p.stride_w(), p.has_stride_h(), 1) << ", pad "
       << Dims(p.pad(), p.pad_h(), p.pad_w(), p.has_pad_h(), 0);
  } else if (layer.type() == "Pooling") {
    const PoolingParameter& p = layer.pooling_param();
    os << PoolingParameter::PoolMethod_Name(p.pool());
    if (p.global_pooling()) {
      os << ", global";
    } else {
      os << ", kernel "
         << (p.has_kernel_h() ? std::to_string(p.kernel_h()) + "x" + std::to_string(p.kernel_w())
                              : std::to_string(p.kernel_size()))
         << ", stride " << p.stride() << ", pad " << p.pad();
    }
  } else if (layer.type() == "InnerProduct") {
    os << "num_output " << layer.inner_product_param().num_output();
  } else if (layer.type() == "Python") {
    os << layer.python_param().module() << "." << layer.python_param().layer();
  }
  return os.str();
}

}  // namespace

std::string NetToDot(const NetParameter& param, const NetDotOptions& options) {
  if (options.rankdir != "LR" && options.rankdir != "TB" && options.rankdir != "BT" &&
      options.rankdir != "RL")
    CREMA_THROW_CONFIG("rankdir must be LR, TB, BT or RL, got \"", options.rankdir, "\"");
  NetParameter net = param;
  if (options.filter_phase) {
    NetParameter filtered;
    net.mutable_state()->set_phase(options.phase);
    FilterNet(net, &filtered);
    net = filtered;
  }
  std::ostringstream os;
  os << "digraph " << Quote(net.name().empty() ? "net" : net.name()) << " {\n"
     << "  rankdir=" << options.rankdir << ";\n"
     << "  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, std::string> current;  // blob name -> node id of its latest version
  int blob_count = 0;
  auto blob_node = [&](const std::string& name) {
    const std::string id = "blob_" + std::to_string(blob_count++);
    current[name] = id;
    os << "  " << Quote(id) << " [label=" << Quote(name)
       << ", shape=octagon, style=filled, fillcolor=\"#E0E0E0\"];\n";
    return id;
  };
  for (const std::string& input : net.input()) blob_node(input);
  for (int i = 0; i < net.layer_size(); ++i) {
    const LayerParameter& layer = net.layer(i);
    const std::string id = "layer_" + std::to_string(i);
    bool in_place = false;
    for (const std::string& top : layer.top())
      for (const std::string& bottom : layer.bottom()) in_place = in_place || top == bottom;
    std::string label = layer.name() + "\n(" + layer.type() + ")";
    const std::string detail = LayerDetail(layer);
    if (!detail.empty()) label += "\n" + detail;
    os << "  " << Quote(id) << " [label=" << Quote(label) << ", shape=record, style=filled, "
       << "fillcolor=" << (in_place ? "\"#90EE90\"" : "\"#6495ED\"") << "];\n";
    for (const std::string& bottom : layer.bottom()) {
      if (!current.count(bottom)) blob_node(bottom);
      os << "  " << Quote(current[bottom]) << " -> " << Quote(id) << ";\n";
    }
    for (const std::string& top : layer.top())
      os << "  " << Quote(id) << " -> " << Quote(blob_node(top)) << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace crema
