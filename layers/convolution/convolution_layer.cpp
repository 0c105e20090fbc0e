#include "layers/convolution/convolution_layer.hpp"

#include <algorithm>

#include "core/workspace.hpp"
#include "crema/layer_registry.hpp"
#include "layers/convolution/depthwise_conv.hpp"
#include "layers/convolution/dnnl_convolution.hpp"
#include "math/blas_setup.hpp"
#include "math/math.hpp"

namespace crema {

void ConvolutionLayer::ComputeOutputShape() {
  output_shape_.clear();
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int input_dim = input_shape(i);
    const int kernel_extent = dilation_[i] * (kernel_shape_[i] - 1) + 1;
    // C++ division truncates toward zero, as in Caffe: an input slightly smaller than the
    // kernel still gives one output (the missing part reads as zero).
    const int output_dim = (input_dim + 2 * pad_[i] - kernel_extent) / stride_[i] + 1;
    CREMA_CHECK_SHAPE(output_dim > 0, "the kernel (extent ", kernel_extent, " on spatial axis ", i,
                      ") does not fit the input of size ", input_dim, " with pad ", pad_[i],
                      ": the output would be empty");
    output_shape_.push_back(output_dim);
  }
}

// ---- depthwise fast path (depthwise_conv.hpp) ----
bool ConvolutionLayer::DepthwiseShapeOf(DepthwiseShape* shape) const {
  if (!UseDepthwiseConv(num_spatial_axes_, channels_, group_, num_output_, force_nd_im2col_))
    return false;
  shape->num = num_;
  shape->channels = channels_;
  shape->multiplier = num_output_ / channels_;
  shape->height = input_shape(0);
  shape->width = input_shape(1);
  shape->out_height = output_shape_[0];
  shape->out_width = output_shape_[1];
  shape->kernel_h = kernel_shape_[0];
  shape->kernel_w = kernel_shape_[1];
  shape->stride_h = stride_[0];
  shape->stride_w = stride_[1];
  shape->pad_h = pad_[0];
  shape->pad_w = pad_[1];
  shape->dilation_h = dilation_[0];
  shape->dilation_w = dilation_[1];
  return true;
}
// ---- end depthwise fast path ----

template <typename T>
void ConvolutionLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* weight = blobs_[0]->cpu_data<T>();
  const T* bias = bias_term_ ? blobs_[1]->cpu_data<T>() : nullptr;
  // ---- depthwise fast path ----
  if (DepthwiseShape shape; DepthwiseShapeOf(&shape)) {
    const T relu_slope = static_cast<T>(fused_relu_slope());
    for (size_t i = 0; i < bottom.size(); ++i)
      DepthwiseConvForward<T>(shape, bottom[i]->cpu_data<T>(), weight, bias,
                              top[i]->mutable_cpu_data<T>(), fused_relu() ? &relu_slope : nullptr);
    return;
  }
  // ---- end depthwise fast path ----
  for (size_t i = 0; i < bottom.size(); ++i)
    ForwardBatch<T>(bottom[i]->cpu_data<T>(), weight, bias, top[i]->mutable_cpu_data<T>());
}

template <typename T>
void ConvolutionLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const T* weight = blobs_[0]->cpu_data<T>();
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  // ---- depthwise fast path ----
  if (DepthwiseShape shape; DepthwiseShapeOf(&shape)) {
    for (size_t i = 0; i < top.size(); ++i) {
      if (weight_down || bias_down)
        DepthwiseConvBackwardParams<T>(shape, top[i]->cpu_diff<T>(), bottom[i]->cpu_data<T>(),
                                       weight_down ? blobs_[0]->mutable_cpu_diff<T>() : nullptr,
                                       bias_down ? blobs_[1]->mutable_cpu_diff<T>() : nullptr);
      if (propagate_down[i])
        DepthwiseConvBackwardData<T>(shape, top[i]->cpu_diff<T>(), weight,
                                     bottom[i]->mutable_cpu_diff<T>());
    }
    return;
  }
  // ---- end depthwise fast path ----
  for (size_t i = 0; i < top.size(); ++i) {
    if (!weight_down && !bias_down && !propagate_down[i]) continue;
    BackwardBatch<T>(top[i]->cpu_diff<T>(), bottom[i]->cpu_data<T>(), weight,
                     weight_down ? blobs_[0]->mutable_cpu_diff<T>() : nullptr,
                     bias_down ? blobs_[1]->mutable_cpu_diff<T>() : nullptr,
                     propagate_down[i] ? bottom[i]->mutable_cpu_diff<T>() : nullptr);
  }
}

// ---- oneDNN CPU engine ----
CpuEngine ConvolutionLayer::DnnlPolicy(const Blob& bottom, const Blob& top) {
  const CpuEngine policy = LayerCpuEngine();
  if (policy == CpuEngine::kCaffe || dtype() != DataType::kFloat32 || channel_axis_ != 1 ||
      num_spatial_axes_ < 2 || num_spatial_axes_ > 3)
    return CpuEngine::kCaffe;
  // Caffe also takes a kernel larger than the padded input (the output size truncates toward
  // zero); oneDNN does not.
  for (int i = 0; i < num_spatial_axes_; ++i)
    if (input_shape(i) + 2 * pad_[i] < dilation_[i] * (kernel_shape_[i] - 1) + 1)
      return CpuEngine::kCaffe;
  if (!dnnl_) dnnl_ = std::make_shared<DnnlConvolution>();
  // Filled in place: its vectors keep their memory (this runs two or three times a pass, and a
  // geometry built afresh allocated six vectors each time).
  DnnlConvGeometry& geometry = dnnl_geometry_;
  geometry.input = bottom.shape();
  geometry.output = top.shape();
  geometry.filter = blobs_[0]->shape();
  geometry.pad = pad_;
  geometry.stride = stride_;
  geometry.dilation = dilation_;
  geometry.group = group_;
  geometry.bias = bias_term_;
  geometry.forward_only = forward_only();
  return dnnl_->Prepare(geometry) ? policy : CpuEngine::kCaffe;
}

bool ConvolutionLayer::NextForwardRunsDnnl(const BlobVec& bottom, const BlobVec& top) {
  // (A top not shaped yet: before the first Forward, which runs crema's kernels first.)
  return top[0]->num_axes() == bottom[0]->num_axes() &&
         cpu_engine_choice_.NextRunsDnnl(DnnlPolicy(*bottom[0], *top[0]), "forward",
                                         bottom[0]->shape());
}

bool ConvolutionLayer::ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) {
  return bottom.size() == 1 && NextForwardRunsDnnl(bottom, top);
}

bool ConvolutionLayer::BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) {
  return bottom.size() == 1 && top[0]->num_axes() == bottom[0]->num_axes() &&
         cpu_engine_choice_.NextRunsDnnl(DnnlPolicy(*bottom[0], *top[0]), "backward",
                                         bottom[0]->shape());
}

bool ConvolutionLayer::ForwardDecidedDnnl(const BlobVec& bottom, const BlobVec& top) {
  if (top[0]->num_axes() != bottom[0]->num_axes()) return false;
  const CpuEngine policy = DnnlPolicy(*bottom[0], *top[0]);
  CpuKernel kernel = CpuKernel::kCrema;
  return policy == CpuEngine::kDnnl ||
         (policy == CpuEngine::kAuto &&
          cpu_engine_choice_.Decided("forward", bottom[0]->shape(), &kernel) &&
          (kernel == CpuKernel::kDnnl || kernel == CpuKernel::kCremaBlocked));
}

namespace {
bool All(const std::vector<int>& v, int value) {
  return std::all_of(v.begin(), v.end(), [&](int e) { return e == value; });
}
}  // namespace

bool ConvolutionLayer::PointwiseDepthwiseWith(const ConvolutionLayer& dw, const Blob& bottom,
                                              cpu::PointwiseDepthwiseShape* shape) const {
  if (num_spatial_axes_ != 2 || dw.num_spatial_axes_ != 2 || channel_axis_ != 1 ||
      dw.channel_axis_ != 1 || bottom.num_axes() != 4 || bottom.shape(1) != channels_ ||
      !All(kernel_shape_, 1) || !All(stride_, 1) || !All(pad_, 0) || !All(dilation_, 1) ||
      group_ != 1 || dw.channels_ != num_output_ || dw.num_output_ != num_output_ ||
      dw.group_ != num_output_ || !All(dw.kernel_shape_, 3) || !All(dw.pad_, 1) ||
      !All(dw.dilation_, 1) || dw.stride_[0] != dw.stride_[1])
    return false;
  shape->in_channels = channels_;
  shape->channels = num_output_;
  shape->height = bottom.shape(2);
  shape->width = bottom.shape(3);
  shape->stride = dw.stride_[0];
  return cpu::PointwiseDepthwiseApplies(*shape);
}

void ConvolutionLayer::set_fused_depthwise(ConvolutionLayer* depthwise, Blob* target,
                                           const float* relu_slope) {
  fused_depthwise_.layer = depthwise;
  fused_depthwise_.target = target;
  fused_depthwise_.relu = relu_slope != nullptr;
  fused_depthwise_.slope = relu_slope != nullptr ? *relu_slope : 0.f;
}

bool ConvolutionLayer::ForwardFusedDepthwise(const Blob& bottom) {
  FusedDepthwise& f = fused_depthwise_;
  cpu::PointwiseDepthwiseShape shape;
  if (bottom.cpu_channel_block() != 16 || !PointwiseDepthwiseWith(*f.layer, bottom, &shape))
    return false;
  // (A depthwise top not reshaped to this input yet: the two run apart, and it reshapes.)
  if (f.target->shape() !=
      std::vector<int>{bottom.shape(0), shape.channels, shape.out_height(), shape.out_width()})
    return false;
  const Blob& pw = *blobs_[0];
  const Blob& dw = *f.layer->blobs()[0];
  // Both packed in one buffer, each at a 64-byte boundary.
  const size_t pw_floats = (static_cast<size_t>(pw.count()) + 15) / 16 * 16;
  if (f.pointwise_generation != pw.data_generation() ||
      f.depthwise_generation != dw.data_generation()) {
    float* packed = f.packed.Resize(pw_floats + dw.count());
    cpu::PackPointwiseWeights(shape, pw.cpu_data<float>(), packed);
    cpu::PackDepthwiseWeights(shape, dw.cpu_data<float>(), packed + pw_floats);
    f.pointwise_generation = pw.data_generation();
    f.depthwise_generation = dw.data_generation();
  }
  cpu::PointwiseDepthwiseArgs args;
  args.x = bottom.cpu_data<float>();
  args.pointwise = f.packed.data();
  args.pointwise_bias = bias_term_ ? blobs_[1]->cpu_data<float>() : nullptr;
  const float relu_slope = fused_relu_slope();
  args.pointwise_relu = fused_relu() ? &relu_slope : nullptr;
  args.depthwise = f.packed.data() + pw_floats;
  args.depthwise_bias = f.layer->bias_term_ ? f.layer->blobs()[1]->cpu_data<float>() : nullptr;
  args.depthwise_relu = f.relu ? &f.slope : nullptr;
  args.threads = CpuThreads();
  args.scratch = workspace().Cpu<float>(
      static_cast<int64_t>(cpu::PointwiseDepthwiseScratchFloats(shape, args.threads)));
  args.y = f.target->mutable_cpu_data<float>();
  cpu::PointwiseDepthwiseForward(shape, bottom.shape(0), args);
  f.target->data()->set_channel_block(16);
  f.ran = true;
  return true;
}

float* ConvolutionLayer::PackedWeights::Resize(size_t count) {
  if (count > capacity_) {
    floats_.reset();  // (the old copy given back first)
    floats_.reset(static_cast<float*>(AllocateHost(count * sizeof(float), kWeightHugePagesFrom)));
    capacity_ = count;
  }
  return floats_.get();
}

bool ConvolutionLayer::BlockedConvApplies(const Blob& bottom, const Blob& top,
                                          cpu::BlockedConvShape* shape) const {
  const bool pointwise = All(kernel_shape_, 1) && All(pad_, 0);
  const bool depthwise = group_ == channels_ && num_output_ == channels_ && group_ > 1 &&
                         stride_.size() == 2 && stride_[0] == stride_[1] &&
                         (stride_[0] == 1 || stride_[0] == 2);
  if (!forward_only() || dtype() != DataType::kFloat32 || num_spatial_axes_ != 2 ||
      channel_axis_ != 1 || bottom.num_axes() != 4 || bottom.shape(1) != channels_ ||
      !((All(kernel_shape_, 3) && All(pad_, 1)) || (pointwise && !depthwise)) ||
      !(All(stride_, 1) || depthwise) || !All(dilation_, 1) || !(group_ == 1 || depthwise) ||
      ChannelBlock() != 16 || !top.channel_block_allowed() || !ChannelBlockable(top.shape()))
    return false;
  shape->in_channels = channels_;
  shape->channels = num_output_;
  shape->height = bottom.shape(2);
  shape->width = bottom.shape(3);
  shape->kernel = pointwise ? 1 : 3;
  shape->depthwise = depthwise;
  shape->stride = stride_[0];
  if (depthwise)
    return cpu::PointwiseDepthwiseApplies(
        {channels_, channels_, shape->height, shape->width, shape->stride});
  return pointwise ? cpu::PointwiseApplies(channels_, num_output_, shape->height * shape->width)
                   : cpu::BlockedConv3x3Applies(*shape);
}

bool ConvolutionLayer::ForwardBlockedConv(const Blob& bottom, Blob* top) {
  cpu::BlockedConvShape shape;
  const int block = bottom.cpu_channel_block();
  if (!BlockedConvApplies(bottom, *top, &shape)) return false;
  // (The 1x1 and depthwise kernels read blocked input only: where the input arrives plain,
  // oneDNN's runs.)
  if (block != 16 && (block != 0 || shape.kernel == 1 || shape.depthwise)) return false;
  const cpu::PointwiseDepthwiseShape depthwise{channels_, channels_, shape.height, shape.width,
                                               shape.stride};
  const Blob& w = *blobs_[0];
  if (blocked_generation_ != w.data_generation()) {
    float* packed = blocked_weights_.Resize(w.count());
    if (shape.depthwise)
      cpu::PackDepthwiseWeights(depthwise, w.cpu_data<float>(), packed);
    else if (shape.kernel == 1)
      cpu::PackPointwiseWeights({channels_, num_output_, 1, 1, 1}, w.cpu_data<float>(), packed);
    else
      cpu::PackBlockedConv3x3Weights(shape, w.cpu_data<float>(), packed);
    blocked_generation_ = w.data_generation();
  }
  const float* bias = bias_term_ ? blobs_[1]->cpu_data<float>() : nullptr;
  const float relu_slope = fused_relu_slope();
  const float* relu = fused_relu() ? &relu_slope : nullptr;
  if (shape.depthwise || shape.kernel == 1) {
    cpu::AloneArgs args;
    args.x = bottom.cpu_data<float>();
    args.weights = blocked_weights_.data();
    args.bias = bias;
    args.relu = relu;
    args.y = top->mutable_cpu_data<float>();
    args.threads = CpuThreads();
    if (shape.depthwise)
      cpu::DepthwiseForward(depthwise, bottom.shape(0), args);
    else
      cpu::PointwiseForward(channels_, num_output_, shape.height * shape.width, bottom.shape(0),
                            args);
  } else {
    cpu::BlockedConvArgs args;
    args.x = bottom.cpu_data<float>();
    args.x_plain = block == 0;
    args.weights = blocked_weights_.data();
    args.bias = bias;
    args.relu = relu;
    args.y = top->mutable_cpu_data<float>();
    args.threads = CpuThreads();
    args.scratch = workspace().Cpu<float>(
        static_cast<int64_t>(cpu::BlockedConv3x3ScratchFloats(shape, bottom.shape(0))));
    cpu::BlockedConv3x3Forward(shape, bottom.shape(0), args);
  }
  top->data()->set_channel_block(16);
  blocked_ran_ = true;
  return true;
}

void ConvolutionLayer::ForwardDnnl(const BlobVec& bottom, const BlobVec& top, CpuKernel kernel) {
  const bool winograd = kernel == CpuKernel::kDnnlWinograd;
  const float* weight = blobs_[0]->cpu_data<float>();
  const float* bias = bias_term_ ? blobs_[1]->cpu_data<float>() : nullptr;
  const float relu_slope = fused_relu_slope();
  if (fused_sum_ != nullptr) {
    // target += conv (+ ReLU), in the target's layout; top stays unwritten.
    CREMA_ASSERT(bottom.size() == 1 && fused_sum_->shape() == top[0]->shape(),
                 "fused sum into a blob of another shape");
    DnnlConvolution::Io io;
    io.weights_generation = forward_only() ? blobs_[0]->data_generation() : 0;
    io.src_block = bottom[0]->cpu_channel_block();
    io.dst_block = fused_sum_->cpu_channel_block();
    io.sum = true;
    if (fused_sum_relu_) io.relu = &fused_sum_slope_;
    io.winograd = winograd;
    dnnl_->Forward(bottom[0]->cpu_data<float>(), weight, bias,
                   fused_sum_->mutable_cpu_data<float>(), &workspace(), io);
    fused_sum_ran_ = true;
    return;
  }
  if (fused_depthwise_.layer != nullptr && !winograd && bottom.size() == 1 &&
      ForwardFusedDepthwise(*bottom[0]))
    return;
  if (kernel == CpuKernel::kCremaBlocked && bottom.size() == 1 &&
      ForwardBlockedConv(*bottom[0], top[0]))
    return;
  for (size_t i = 0; i < bottom.size(); ++i) {
    DnnlConvolution::Io io;
    io.weights_generation = forward_only() ? blobs_[0]->data_generation() : 0;
    io.src_block = bottom[i]->cpu_channel_block();
    io.dst_block =
        top[i]->channel_block_allowed() && ChannelBlockable(top[i]->shape()) ? ChannelBlock() : 0;
    // A fused ReLU inside the convolution, with the ReLU layer's values (dnnl_convolution.cpp).
    if (fused_relu()) io.relu = &relu_slope;
    io.winograd = winograd;
    dnnl_->Forward(bottom[i]->cpu_data<float>(), weight, bias, top[i]->mutable_cpu_data<float>(),
                   &workspace(), io);
    top[i]->data()->set_channel_block(io.dst_block);
  }
}

void ConvolutionLayer::BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom, bool winograd) {
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  for (size_t i = 0; i < top.size(); ++i) {
    // x and dy as the net holds them (blocked where BackwardReadsChannelBlocked let them
    // through); dx in x's layout (blocked where the forward chain was).
    DnnlBackwardArgs args;
    args.src_block = bottom[i]->cpu_channel_block();
    args.dst_block = top[i]->cpu_diff_channel_block();
    args.x = bottom[i]->cpu_data<float>();
    args.dy = top[i]->cpu_diff<float>();
    args.w = blobs_[0]->cpu_data<float>();
    if (weight_down) args.dw = blobs_[0]->mutable_cpu_diff_to_add<float>(&args.overwrite_dw);
    if (bias_down) args.db = blobs_[1]->mutable_cpu_diff_to_add<float>(&args.overwrite_db);
    if (propagate_down[i]) args.dx = bottom[i]->mutable_cpu_diff<float>();
    dnnl_->Backward(args, &workspace(), winograd);
    if (propagate_down[i]) bottom[i]->diff()->set_channel_block(args.src_block);
  }
}
// ---- end oneDNN CPU engine ----

void ConvolutionLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  fused_sum_ran_ = false;
  fused_depthwise_.ran = false;
  blocked_ran_ = false;
  const auto crema = [&] {
    CREMA_ASSERT(bottom[0]->cpu_channel_block() == 0 && fused_sum_ == nullptr,
                 "channel-blocked input or a fused sum for crema's kernels");
    CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
  };
  const CpuEngine policy = DnnlPolicy(*bottom[0], *top[0]);  // (prepares dnnl_)
  const auto dnnl = [&] { ForwardDnnl(bottom, top, CpuKernel::kDnnl); };
  const auto winograd = [&] { ForwardDnnl(bottom, top, CpuKernel::kDnnlWinograd); };
  const auto blocked = [&] { ForwardDnnl(bottom, top, CpuKernel::kCremaBlocked); };
  const bool has_winograd = policy != CpuEngine::kCaffe && dnnl_->HasWinograd();
  cpu::BlockedConvShape shape;
  const bool has_blocked = policy != CpuEngine::kCaffe && bottom.size() == 1 &&
                           BlockedConvApplies(*bottom[0], *top[0], &shape);
  cpu_engine_choice_.Run(policy, name(), "forward", bottom[0]->shape(), crema, dnnl,
                         has_winograd ? CpuEngineChoice::Pass(winograd) : nullptr,
                         has_blocked ? CpuEngineChoice::Pass(blocked) : nullptr);
  // A race decided for another kernel: the packed copy its blocked passes made goes (a copy of
  // the layer's weights: ResNet-50's would be 94 MB).
  CpuKernel decided = CpuKernel::kCremaBlocked;
  if (blocked_generation_ != 0 &&
      cpu_engine_choice_.Decided("forward", bottom[0]->shape(), &decided) &&
      decided != CpuKernel::kCremaBlocked) {
    blocked_weights_.Clear();
    blocked_generation_ = 0;
  }
}

void ConvolutionLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  const auto crema = [&] {
    CREMA_ASSERT(bottom[0]->cpu_channel_block() == 0 && top[0]->cpu_diff_channel_block() == 0,
                 "channel-blocked input or gradient for crema's kernels");
    CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
  };
  const CpuEngine policy = DnnlPolicy(*bottom[0], *top[0]);  // (prepares dnnl_)
  const auto dnnl = [&] { BackwardDnnl(top, propagate_down, bottom, false); };
  const auto winograd = [&] { BackwardDnnl(top, propagate_down, bottom, true); };
  const bool has_winograd = policy != CpuEngine::kCaffe && dnnl_->HasWinograd();
  cpu_engine_choice_.Run(policy, name(), "backward", bottom[0]->shape(), crema, dnnl,
                         has_winograd ? CpuEngineChoice::Pass(winograd) : nullptr);
}

CREMA_REGISTER_LAYER(Convolution, ConvolutionLayer);

}  // namespace crema
