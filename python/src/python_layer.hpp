#pragma once
// The "Python" layer type: python_param { module layer param_str } names a Python class (a
// subclass of crema.Layer) whose setup/reshape/forward/backward run on lists of crema.Blob views
// of the layer's bottoms and tops, as in pycaffe. The class is constructed with the layer's
// LayerParameter (crema.proto.crema_pb2) and gets `param_str`, `phase` and `blobs` (its learnable
// blobs; `self.blobs.add_blob(*shape)` in setup) before setup. Every call holds the GIL; the
// layer runs its CPU code in GPU nets too. Errors raised by the Python code become
// crema::RuntimeError naming the layer.
#include <Python.h>

#include <memory>

#include "crema/layer.hpp"

namespace crema::python {

class PythonLayer final : public Layer {
 public:
  using Layer::Layer;
  ~PythonLayer() override;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Python"; }
  bool AllowsInPlace() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  PyObject* self_ = nullptr;  // the Python layer object (a strong reference)
};

// A Python layer's learnable blobs (`self.blobs`): a list-like view of Layer::blobs().
struct LayerBlobs {
  std::vector<BlobPtr>* blobs;
};

// Creates a PythonLayer; what the extension registers as "Python", and what the crema CLI calls
// through the capsule crema._crema._layer_factory.
Layer* CreatePythonLayer(const LayerParameter& param);

}  // namespace crema::python
