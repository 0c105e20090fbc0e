// crema._crema: the C++ side of the Python package. Blob data/diff are numpy arrays over the
// blob's own host memory (no copy): each access makes a fresh view whose base object holds the
// memory, so an array taken before a reshape that reallocates stays valid (it then no longer
// aliases the blob). Nets and solvers release the GIL while they compute; Python layers take it
// back (python_layer.cpp). The pythonic API (OrderedDicts, forward(**inputs), ...) is in
// python/crema/*.py on top of these bindings.
#include <glog/logging.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/blob.hpp"
#include "crema/device.hpp"
#include "crema/error.hpp"
#include "crema/layer.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "crema/version.hpp"
#include "net/net_dot.hpp"
#include "python_layer.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace py = pybind11;

namespace crema::python {
namespace {

// set_mode_cpu/set_mode_gpu/set_device: the device new nets and solvers are built for.
Device& DefaultDevice() {
  static Device device = Device::Cpu();
  return device;
}
int& DefaultGpuId() {
  static int id = 0;
  return id;
}

// A numpy view of a blob's data or diff (host memory, synced there first).
py::array BlobArray(Blob& blob, bool diff) {
  std::vector<py::ssize_t> shape(blob.shape().begin(), blob.shape().end());
  const py::dtype dtype =
      blob.dtype() == DataType::kFloat64 ? py::dtype::of<double>() : py::dtype::of<float>();
  if (blob.count() == 0 || !blob.data()) return py::array(dtype, shape);
  void* ptr = nullptr;
  CREMA_DISPATCH_FLOAT(blob.dtype(), T,
                       ptr = diff ? static_cast<void*>(blob.mutable_cpu_diff<T>())
                                  : static_cast<void*>(blob.mutable_cpu_data<T>()));
  auto* owner = new std::shared_ptr<SyncedMemory>(diff ? blob.diff() : blob.data());
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<SyncedMemory>*>(p); });
  return py::array(dtype, shape, {}, ptr, base);
}

void SetBlobArray(Blob& blob, bool diff, const py::array& value) {
  // Copies into the blob's memory (numpy broadcasting rules); the blob keeps its shape.
  BlobArray(blob, diff).attr("__setitem__")(py::ellipsis(), value);
}

std::vector<int> ShapeFromArgs(const py::args& args) {
  std::vector<int> shape;
  if (args.size() == 1 && py::isinstance<py::sequence>(args[0])) {
    for (py::handle h : args[0]) shape.push_back(h.cast<int>());
  } else {
    for (py::handle h : args) shape.push_back(h.cast<int>());
  }
  return shape;
}

Phase ToPhase(int phase) {
  if (phase != TRAIN && phase != TEST)
    CREMA_THROW_CONFIG("phase must be crema.TRAIN (0) or crema.TEST (1), got ", phase);
  return static_cast<Phase>(phase);
}

// memory_plan= "off" (the default: every blob keeps its values), "inference" or "training".
MemoryPlan ToMemoryPlan(const std::string& plan) {
  if (plan == "off") return MemoryPlan::kOff;
  if (plan == "inference") return MemoryPlan::kInference;
  if (plan == "training") return MemoryPlan::kTraining;
  CREMA_THROW_CONFIG("memory_plan must be \"off\", \"inference\" or \"training\", got \"", plan,
                     "\"");
}

std::unique_ptr<Net> MakeNet(const std::string& model, int phase, const py::object& weights,
                             int level, const std::vector<std::string>& stages,
                             const std::string& memory_plan,
                             const std::vector<std::string>& keep_blobs) {
  std::unique_ptr<Net> net = Net::FromFile(model, ToPhase(phase), level, stages, DefaultDevice());
  net->SetMemoryPlan(ToMemoryPlan(memory_plan), keep_blobs);
  if (!weights.is_none()) net->CopyTrainedLayersFrom(weights.cast<std::string>());
  return net;
}

// A net from a serialized NetParameter (a crema_pb2.NetParameter or NetSpec.to_proto()).
std::unique_ptr<Net> MakeNetFromBytes(const py::bytes& bytes, int phase, const py::object& weights,
                                      int level, const std::vector<std::string>& stages,
                                      const std::string& memory_plan,
                                      const std::vector<std::string>& keep_blobs) {
  NetParameter param;
  if (!param.ParseFromString(std::string(bytes)))
    CREMA_THROW_CONFIG("not a serialized NetParameter");
  NetOptions options;
  options.device = DefaultDevice();
  options.override_state = true;
  options.state.set_phase(ToPhase(phase));
  options.state.set_level(level);
  for (const std::string& s : stages) options.state.add_stage(s);
  options.memory_plan = ToMemoryPlan(memory_plan);
  options.keep_blobs = keep_blobs;
  auto net = std::make_unique<Net>(param, options);
  if (!weights.is_none()) net->CopyTrainedLayersFrom(weights.cast<std::string>());
  return net;
}

// A Python library keeps quiet: in a Python process (not the crema CLI, which embeds Python for
// Python layers and has set up logging itself) crema logs warnings and errors only, unless
// GLOG_minloglevel says otherwise; set_log_level changes it. Logs go to stderr, or to files in
// GLOG_log_dir when that is set.
void InitLogging() {
  if (google::IsGoogleLoggingInitialized()) return;
  if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = google::GLOG_WARNING;
  FLAGS_logtostderr = FLAGS_log_dir.empty();
  google::InitGoogleLogging("crema");
}

constexpr const char* kLogLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};

// "INFO" .. "FATAL" (any case), glog's 0..3 or the logging module's levels (DEBUG and INFO ->
// INFO, WARNING, ERROR, CRITICAL -> FATAL).
void SetLogLevel(const py::object& level) {
  if (py::isinstance<py::str>(level)) {
    std::string name = level.cast<std::string>();
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name == "WARN") name = "WARNING";
    for (int i = 0; i < 4; ++i) {
      if (name == kLogLevels[i]) {
        FLAGS_minloglevel = i;
        return;
      }
    }
  } else if (py::isinstance<py::int_>(level) && !py::isinstance<py::bool_>(level)) {
    const int value = level.cast<int>();
    if (value >= 0 && value <= 3) {
      FLAGS_minloglevel = value;
      return;
    }
    if (value >= 10 && value <= 50 && value % 10 == 0) {
      FLAGS_minloglevel = std::max(0, value / 10 - 2);
      return;
    }
  }
  CREMA_THROW_CONFIG(
      "set_log_level: the level must be 'INFO', 'WARNING', 'ERROR', 'FATAL', 0-3 "
      "or one of the logging module's levels, got ",
      py::repr(level).cast<std::string>());
}

void SaveNet(const Net& net, const std::string& path) {
  const bool hdf5 = path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
  if (hdf5) {
    net.ToHDF5(path);
    return;
  }
  NetParameter param;
  net.ToProto(&param);
  WriteBinaryProto(param, path);
}

std::unique_ptr<Solver> MakeSolver(const std::string& path, const std::string& type) {
  SolverParameter param;
  SolverOptions options;
  options.source = ReadSolverParamsFromTextFile(path, &param);
  if (!type.empty()) {
    param.clear_solver_type();
    param.set_type(type);
  }
  options.device = DefaultDevice();
  // Python may read any blob of solver.test_nets.
  options.test_net_memory_plan = MemoryPlan::kOff;
  return Solver::Create(param, options);
}

// Text prototxt <-> binary, through the C++ parser (locations and legacy upgrade included).
py::bytes ParseNetText(const std::string& text, const std::string& name) {
  NetParameter param;
  ParseTextProto(text, name, &param);
  std::string bytes;
  param.SerializeToString(&bytes);
  return py::bytes(bytes);
}

py::bytes ReadNetFile(const std::string& path) {
  NetParameter param;
  ReadNetParamsFromTextFile(path, &param);
  std::string bytes;
  param.SerializeToString(&bytes);
  return py::bytes(bytes);
}

std::string NetDot(const py::bytes& bytes, const std::string& rankdir, int phase) {
  NetParameter param;
  if (!param.ParseFromString(std::string(bytes)))
    CREMA_THROW_CONFIG("not a serialized NetParameter");
  NetDotOptions options;
  options.rankdir = rankdir;
  if (phase >= 0) options.phase = ToPhase(phase);
  options.filter_phase = phase >= 0;
  return NetToDot(param, options);
}

#ifdef CREMA_WITH_OPENCV
// HxWxC float32 in [0, 1], RGB (or one grey channel), as pycaffe's load_image.
py::array LoadImage(const std::string& path, bool color) {
  cv::Mat image = cv::imread(path, color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  if (image.empty()) CREMA_THROW_RUNTIME("cannot read the image ", path);
  if (color) cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
  cv::Mat result;
  image.convertTo(result, CV_32F, image.depth() == CV_16U ? 1.0 / 65535 : 1.0 / 255);
  const int channels = result.channels();
  py::array_t<float> out({result.rows, result.cols, channels});
  for (int y = 0; y < result.rows; ++y)
    std::copy(result.ptr<float>(y), result.ptr<float>(y) + result.cols * channels,
              out.mutable_data(y, 0, 0));
  return std::move(out);
}

// Resamples each channel of an HxWxC float32 image (interp_order 0 nearest, 1 bilinear, 3 cubic).
py::array ResizeImage(const py::array_t<float, py::array::c_style | py::array::forcecast>& image,
                      int height, int width, int interp_order) {
  if (image.ndim() != 3) CREMA_THROW_CONFIG("resize_image wants an HxWxC array");
  if (height <= 0 || width <= 0)
    CREMA_THROW_CONFIG("resize_image: the new size must be positive, got ", height, "x", width);
  const int channels = static_cast<int>(image.shape(2));
  const int flag = interp_order == 0   ? cv::INTER_NEAREST
                   : interp_order == 1 ? cv::INTER_LINEAR
                                       : cv::INTER_CUBIC;
  py::array_t<float> out({height, width, channels});
  for (int c = 0; c < channels; ++c) {
    cv::Mat plane(static_cast<int>(image.shape(0)), static_cast<int>(image.shape(1)), CV_32F);
    for (int y = 0; y < plane.rows; ++y)
      for (int x = 0; x < plane.cols; ++x) plane.at<float>(y, x) = *image.data(y, x, c);
    cv::Mat resized;
    cv::resize(plane, resized, cv::Size(width, height), 0, 0, flag);
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) *out.mutable_data(y, x, c) = resized.at<float>(y, x);
  }
  return std::move(out);
}
#endif

std::vector<BlobPtr> NetBlobs(const Net& net) { return net.blobs(); }

}  // namespace
}  // namespace crema::python

PYBIND11_MODULE(_crema, m) {
  using namespace crema;
  using namespace crema::python;
  m.doc() = "crema's C++ core (see the crema package)";
  m.attr("TRAIN") = static_cast<int>(TRAIN);
  m.attr("TEST") = static_cast<int>(TEST);
  m.attr("__version__") = VersionString();
  m.attr("has_opencv") =
#ifdef CREMA_WITH_OPENCV
      true;
#else
      false;
#endif
  py::register_exception<ConfigError>(m, "ConfigError", PyExc_ValueError);
  InitLogging();
  m.def("set_log_level", &SetLogLevel, py::arg("level"),
        "The lowest severity crema logs: 'INFO' (every net's set-up), 'WARNING' (the default, "
        "unless GLOG_minloglevel is set), 'ERROR' or 'FATAL'; also 0-3 or logging.INFO etc.");
  m.def(
      "get_log_level", [] { return std::string(kLogLevels[std::clamp(FLAGS_minloglevel, 0, 3)]); },
      "The lowest severity crema logs ('INFO', 'WARNING', 'ERROR' or 'FATAL').");

  if (!LayerRegistry::Has("Python")) {
    LayerRegistry::Add("Python", [](const LayerParameter& p) {
      return std::unique_ptr<Layer>(CreatePythonLayer(p));
    });
  }
  // For the crema CLI, which registers its own "Python" type that forwards here.
  m.attr("_layer_factory") =
      py::capsule(reinterpret_cast<void*>(&CreatePythonLayer), "crema._crema._layer_factory");

  m.def("set_mode_cpu", [] { DefaultDevice() = Device::Cpu(); });
  m.def("set_mode_gpu", [] {
    if (!CudaAvailable())
      throw RuntimeError(
          "set_mode_gpu: no CUDA device is visible (or crema was built without CUDA)");
    SetCudaDevice(DefaultGpuId());
    DefaultDevice() = Device::Cuda(DefaultGpuId());
  });
  m.def("set_device", [](int id) {
    if (id < 0) CREMA_THROW_CONFIG("set_device: the device id must be >= 0, got ", id);
    DefaultGpuId() = id;
    if (DefaultDevice().is_cuda()) {
      SetCudaDevice(id);
      DefaultDevice() = Device::Cuda(id);
    }
  });
  m.def(
      "device", [] { return DefaultDevice().ToString(); }, "the device new nets are built for");
  m.def("set_random_seed", [](int64_t seed) { SetRandomSeed(seed); });
  m.def("layer_types", [] { return LayerRegistry::Types(); });
  m.def("solver_types", [] { return Solver::Types(); });
  m.def("_parse_net_text", &ParseNetText, py::arg("text"), py::arg("name") = "<string>");
  m.def("_read_net_file", &ReadNetFile);
  m.def("_net_to_dot", &NetDot, py::arg("net_param"), py::arg("rankdir") = "LR",
        py::arg("phase") = -1);
#ifdef CREMA_WITH_OPENCV
  m.def("_load_image", &LoadImage, py::arg("path"), py::arg("color") = true);
  m.def("_resize_image", &ResizeImage, py::arg("image"), py::arg("height"), py::arg("width"),
        py::arg("interp_order") = 1);
#endif

  py::class_<Blob, std::shared_ptr<Blob>>(m, "Blob")
      .def(py::init(
          [](const py::args& shape) { return std::make_shared<Blob>(ShapeFromArgs(shape)); }))
      .def_property(
          "data", [](Blob& b) { return BlobArray(b, false); },
          [](Blob& b, const py::array& v) { SetBlobArray(b, false, v); })
      .def_property(
          "diff", [](Blob& b) { return BlobArray(b, true); },
          [](Blob& b, const py::array& v) { SetBlobArray(b, true, v); })
      .def_property_readonly("shape",
                             [](const Blob& b) {
                               py::tuple t(b.shape().size());
                               for (size_t i = 0; i < b.shape().size(); ++i) t[i] = b.shape()[i];
                               return t;
                             })
      .def_property_readonly("count", [](const Blob& b) { return b.count(); })
      .def_property_readonly("num", &Blob::num)
      .def_property_readonly("channels", &Blob::channels)
      .def_property_readonly("height", &Blob::height)
      .def_property_readonly("width", &Blob::width)
      .def("reshape", [](Blob& b, const py::args& shape) { b.Reshape(ShapeFromArgs(shape)); })
      .def("_data_ptr",
           [](const Blob& b) {
             return b.count() == 0 ? uintptr_t{0}
                                   : reinterpret_cast<uintptr_t>(b.data()->cpu_data());
           })
      .def("_diff_ptr",
           [](const Blob& b) {
             return b.count() == 0 ? uintptr_t{0}
                                   : reinterpret_cast<uintptr_t>(b.diff()->cpu_data());
           })
      .def("__repr__", [](const Blob& b) { return "<crema.Blob " + b.shape_string() + ">"; });

  py::class_<LayerBlobs>(m, "_LayerBlobs")
      .def("__len__", [](const LayerBlobs& l) { return l.blobs->size(); })
      .def("__getitem__",
           [](const LayerBlobs& l, int i) {
             if (i < 0) i += static_cast<int>(l.blobs->size());
             if (i < 0 || i >= static_cast<int>(l.blobs->size())) throw py::index_error();
             return (*l.blobs)[i];
           })
      .def("__iter__", [](const LayerBlobs& l) { return py::iter(py::cast(*l.blobs)); })
      .def("add_blob", [](LayerBlobs& l, const py::args& shape) {
        l.blobs->push_back(std::make_shared<Blob>(ShapeFromArgs(shape)));
      });

  py::class_<Layer, std::unique_ptr<Layer, py::nodelete>>(m, "Layer_")
      .def_property_readonly("type", [](const Layer& l) { return std::string(l.type()); })
      .def_property_readonly("name", &Layer::name)
      .def_property_readonly("blobs", [](Layer& l) { return l.blobs(); })
      .def("__repr__",
           [](const Layer& l) { return "<crema layer " + l.name() + " (" + l.type() + ")>"; });

  py::class_<Net, std::unique_ptr<Net>>(m, "Net", py::dynamic_attr())
      // bytes first: pybind11 would also accept bytes as a std::string path.
      .def(py::init(&MakeNetFromBytes), py::arg("model"), py::arg("phase"),
           py::arg("weights") = py::none(), py::arg("level") = 0,
           py::arg("stages") = std::vector<std::string>(), py::arg("memory_plan") = "off",
           py::arg("keep_blobs") = std::vector<std::string>())
      .def(py::init(&MakeNet), py::arg("model"), py::arg("phase"), py::arg("weights") = py::none(),
           py::arg("level") = 0, py::arg("stages") = std::vector<std::string>(),
           py::arg("memory_plan") = "off", py::arg("keep_blobs") = std::vector<std::string>())
      // numpy views of the weights may have been written since they were taken: caches of
      // values derived from them (oneDNN's reordered weights) must not be trusted.
      .def(
          "_forward",
          [](Net& net, int start, int end) {
            for (const BlobPtr& param : net.params())
              if (param->data()) param->data()->MarkWritten();
            return net.ForwardFromTo(start, end);
          },
          py::call_guard<py::gil_scoped_release>())
      .def("_backward", &Net::BackwardFromTo, py::call_guard<py::gil_scoped_release>())
      .def("reshape", &Net::Reshape, py::call_guard<py::gil_scoped_release>())
      .def("copy_from", py::overload_cast<const std::string&>(&Net::CopyTrainedLayersFrom))
      .def("share_with", &Net::ShareTrainedLayersWith)
      .def("save", &SaveNet, py::arg("path"))
      .def("save_hdf5", [](const Net& n, const std::string& path) { n.ToHDF5(path); })
      .def("clear_param_diffs", [](Net& net) { net.ClearParamDiffs(); })
      .def("update", &Net::Update)
      .def("set_debug_info", &Net::set_debug_info)
      .def(
          "to_proto",
          [](const Net& n, bool write_diff) {
            NetParameter param;
            n.ToProto(&param, write_diff);
            std::string bytes;
            param.SerializeToString(&bytes);
            return py::bytes(bytes);
          },
          py::arg("write_diff") = false)
      .def_property_readonly("name", &Net::name)
      .def_property_readonly("phase", [](const Net& n) { return static_cast<int>(n.phase()); })
      .def_property_readonly("_blob_names", &Net::blob_names)
      .def_property_readonly("_blobs_list", &NetBlobs)
      .def_property_readonly("_layer_names", &Net::layer_names)
      .def_property_readonly(
          "layers",
          [](const Net& n) {
            std::vector<Layer*> layers;
            for (const auto& l : n.layers()) layers.push_back(l.get());
            return layers;
          },
          py::return_value_policy::reference_internal)
      .def_property_readonly("_inputs", &Net::input_blob_indices)
      .def_property_readonly("_outputs", &Net::output_blob_indices)
      .def("_top_ids", &Net::top_id_vec)
      .def("_bottom_ids", &Net::bottom_ids)
      .def("_blob_loss_weights", &Net::blob_loss_weights);

  py::class_<Solver, std::unique_ptr<Solver>>(m, "Solver")
      .def(py::init(&MakeSolver), py::arg("solver_file"), py::arg("type") = "")
      .def("step", &Solver::Step, py::arg("iters"), py::call_guard<py::gil_scoped_release>())
      .def(
          "solve",
          [](Solver& s, const py::object& resume) {
            const std::string file = resume.is_none() ? "" : resume.cast<std::string>();
            py::gil_scoped_release release;
            s.Solve(file);
          },
          py::arg("resume_file") = py::none())
      .def("snapshot", &Solver::Snapshot)
      .def("restore", &Solver::Restore)
      .def("test_all", &Solver::TestAll, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("net", &Solver::net, py::return_value_policy::reference_internal)
      .def_property_readonly(
          "test_nets",
          [](const Solver& s) {
            std::vector<Net*> nets;
            for (const auto& n : s.test_nets()) nets.push_back(n.get());
            return nets;
          },
          py::return_value_policy::reference_internal)
      .def_property_readonly("iter", &Solver::iter)
      .def_property_readonly("type", [](const Solver& s) { return std::string(s.type()); })
      .def_property_readonly("smoothed_loss", &Solver::smoothed_loss)
      .def_property_readonly("learning_rate", &Solver::GetLearningRate)
      .def_property_readonly("param", [](const Solver& s) {
        std::string bytes;
        s.param().SerializeToString(&bytes);
        return py::bytes(bytes);
      });
}
