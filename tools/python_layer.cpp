// The "Python" layer type in the crema CLI. Built with Python (CREMA_WITH_PYTHON), the CLI embeds
// the interpreter on the first Python layer it creates, imports crema._crema (from
// <crema's folder>/python — build/python beside build/crema —, from an installed crema's
// <prefix>/CREMA_PYTHON_INSTALL_DIR, or PYTHONPATH) and builds the layer
// with the extension's factory, so the CLI and `import crema` run the same code. The layer's own
// module is found through PYTHONPATH, as in Caffe. Without Python the type still exists and says
// why it cannot run.
#include <string>

#include "crema/error.hpp"
#include "crema/layer_registry.hpp"

#ifdef CREMA_WITH_PYTHON
#include <Python.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <mutex>
#endif

namespace crema::cli {
namespace {

#ifdef CREMA_WITH_PYTHON
using Factory = Layer* (*)(const LayerParameter&);

std::string PythonError() {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  std::string text = "unknown error";
  if (value != nullptr) {
    PyObject* str = PyObject_Str(value);
    if (str != nullptr && PyUnicode_Check(str)) text = PyUnicode_AsUTF8(str);
    Py_XDECREF(str);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return text;
}

// Starts the interpreter once and fetches the extension's layer factory; afterwards the GIL is
// released, and the layers take it for each call.
Factory GetFactory(const LayerParameter& param) {
  static std::once_flag once;
  static Factory factory = nullptr;
  static std::string error;
  std::call_once(once, [] {
    Py_InitializeEx(0);  // no signal handlers: Ctrl-C stays the solver's
    char exe[PATH_MAX] = {0};
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const std::filesystem::path exe_dir =
        n > 0 ? std::filesystem::path(std::string(exe, n)).parent_path() : "";
    for (const std::filesystem::path& dir : {exe_dir / "python",
#ifdef CREMA_PYTHON_INSTALL_DIR
                                             exe_dir.parent_path() / CREMA_PYTHON_INSTALL_DIR
#endif
         }) {
      if (exe_dir.empty() || !std::filesystem::exists(dir / "crema")) continue;
      PyObject* sys_path = PySys_GetObject("path");  // borrowed
      PyObject* entry = PyUnicode_FromString(dir.c_str());
      PyList_Insert(sys_path, 0, entry);
      Py_DECREF(entry);
      break;
    }
    factory = reinterpret_cast<Factory>(PyCapsule_Import("crema._crema._layer_factory", 0));
    if (factory == nullptr) error = PythonError();
    PyEval_SaveThread();
  });
  if (factory == nullptr)
    CREMA_THROW_RUNTIME("layer \"", param.name(),
                        "\" (Python): cannot import crema's Python extension: ", error,
                        " (build it with CREMA_PYTHON=ON, or put its folder on PYTHONPATH)");
  return factory;
}

const LayerRegisterer kPythonLayer("Python", [](const LayerParameter& p) {
  return std::unique_ptr<Layer>(GetFactory(p)(p));
});
#else
const LayerRegisterer kPythonLayer("Python", [](const LayerParameter& p) -> std::unique_ptr<Layer> {
  CREMA_THROW_RUNTIME("layer \"", p.name(),
                      "\" (Python): this crema was built without Python support (CREMA_PYTHON=OFF, "
                      "or Python 3 development files, NumPy or pybind11 were not found); rebuild "
                      "with them to run Python layers");
});
#endif

}  // namespace
}  // namespace crema::cli
