#include "python_layer.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "crema/error.hpp"

namespace py = pybind11;

namespace crema::python {
namespace {

bool InterpreterAlive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// Non-owning views of the net's blobs: they live as long as the net, which outlives the call.
py::list BlobList(const BlobVec& blobs) {
  py::list list;
  for (Blob* blob : blobs)
    list.append(py::cast(std::shared_ptr<Blob>(std::shared_ptr<Blob>(), blob)));
  return list;
}

}  // namespace

PythonLayer::~PythonLayer() {
  if (self_ == nullptr || !InterpreterAlive()) return;  // at interpreter exit: leak it
  py::gil_scoped_acquire gil;
  Py_DECREF(self_);
}

// Runs `body` with the GIL held, turning a Python exception into a RuntimeError naming the layer.
template <typename Body>
static void CallPython(const Layer& layer, const char* what, Body&& body) {
  py::gil_scoped_acquire gil;
  try {
    body();
  } catch (py::error_already_set& e) {
    throw RuntimeError(layer.ErrorPrefix("python_param") + StrCat("Python ", what, ": ", e.what()));
  }
}

void PythonLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PythonParameter& p = layer_param_.python_param();
  if (p.module().empty() || p.layer().empty())
    throw ConfigError(ErrorPrefix("python_param") +
                      "python_param needs `module` and `layer` (a class in that module)");
  CallPython(*this, "setup", [&] {
    py::object cls = py::module_::import(p.module().c_str()).attr(p.layer().c_str());
    // The LayerParameter as a Python message when crema's proto classes are importable.
    py::object param = py::none();
    try {
      std::string bytes;
      layer_param_.SerializeToString(&bytes);
      param = py::module_::import("crema.proto.crema_pb2")
                  .attr("LayerParameter")
                  .attr("FromString")(py::bytes(bytes));
    } catch (py::error_already_set&) {
    }
    py::object self = cls(param);
    self.attr("param_str") = p.param_str();
    self.attr("phase") = static_cast<int>(phase_);
    self.attr("blobs") = py::cast(LayerBlobs{&blobs_});
    self_ = self.release().ptr();
    py::handle(self_).attr("setup")(BlobList(bottom), BlobList(top));
  });
  param_propagate_down_.resize(blobs_.size(), true);
}

void PythonLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CallPython(*this, "reshape",
             [&] { py::handle(self_).attr("reshape")(BlobList(bottom), BlobList(top)); });
}

void PythonLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CallPython(*this, "forward",
             [&] { py::handle(self_).attr("forward")(BlobList(bottom), BlobList(top)); });
}

void PythonLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  CallPython(*this, "backward", [&] {
    py::list down;
    for (bool d : propagate_down) down.append(d);
    py::handle(self_).attr("backward")(BlobList(top), down, BlobList(bottom));
  });
}

Layer* CreatePythonLayer(const LayerParameter& param) { return new PythonLayer(param); }

}  // namespace crema::python
