// libemmy_torch: an Emmy export as a TorchScript custom class, `torch.classes.emmy.Model`
// (docs/RUNTIME.md, PyTorch). Loaded with torch.ops.load_library; emmy_torch.py beside it wraps
// it as a torch.nn.Module. It is a thin layer over libemmy_runtime's Model: tensors in, tensors
// out, no copy where the runtime can use the caller's memory in place.
//
//   m = torch.classes.emmy.Model("layer0.emmy")
//   m.bind("layers.0.mlp.up_proj.weight", w)   # used in place (held by m), never copied
//   m.set("hidden_states", x)                  # copied into a tensor of m's own, bound once
//   y = m.run()                                # fresh tensors, one per output
//   y = m.run_on(torch.cuda.current_stream().cuda_stream)  # cuda: stream-ordered, no host wait
//
// Why `set` copies into a tensor of its own rather than binding the caller's: on cuda the
// runtime records the launches into one CUDA graph, captured again whenever a bound address
// changes; a per-call activation bound in place would mean a capture per call.
#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "emmy/runtime.hpp"

namespace {

using emmy::runtime::BufferInfo;

// The torch dtype of an IR dtype name; Undefined for one torch has no counterpart of.
c10::ScalarType torch_dtype(const std::string& dtype) {
  static const std::map<std::string, c10::ScalarType> types = {
      {"f32", c10::kFloat}, {"f16", c10::kHalf}, {"bf16", c10::kBFloat16}, {"f64", c10::kDouble},
      {"i32", c10::kInt},   {"i64", c10::kLong}, {"bool", c10::kBool},     {"u8", c10::kByte}};
  auto it = types.find(dtype);
  return it == types.end() ? c10::ScalarType::Undefined : it->second;
}

class TorchModel : public torch::CustomClassHolder {
 public:
  explicit TorchModel(const std::string& path)
      // The runtime's errors (emmy::runtime::Error, a std::runtime_error) reach Python as
      // RuntimeError with their message, which names the file or tensor and what is wrong.
      : model_(emmy::runtime::Model::load(path)), cuda_(model_.plan().backend == "cuda") {
    // A device index from the environment as the runtime takes it (EMMY_CUDA_DEVICE), so the
    // output tensors are made on the device the kernels ran on.
    if (const char* d = std::getenv("EMMY_CUDA_DEVICE")) device_index_ = std::atoi(d);
  }

  std::string backend() const { return model_.plan().backend; }
  std::string graph_name() const { return model_.plan().graph_name; }

  std::vector<std::string> input_names() const { return names(model_.inputs()); }
  std::vector<std::string> output_names() const { return names(model_.outputs()); }
  std::vector<std::string> unbound() const { return model_.unbound(); }

  // role / dtype / shape of an input or output, by name.
  std::string role(const std::string& name) const { return info(name).role; }
  std::string dtype(const std::string& name) const { return info(name).dtype; }
  std::vector<int64_t> shape(const std::string& name) const { return info(name).shape; }

  // In place: the kernels read `t`'s memory (held here until bound again).
  void bind(const std::string& name, at::Tensor t) {
    at::Tensor c = checked_input(name, t);
    staged_.erase(name);
    bind_in_place(name, c);
    held_[name] = c;
  }

  // Copied into a tensor of this model's (made and bound in place once, at the first set).
  void set(const std::string& name, at::Tensor t) {
    const BufferInfo& b = checked_info(name, t);
    auto it = staged_.find(name);
    if (it == staged_.end()) {
      at::Tensor own = at::empty(b.shape, t.options().dtype(torch_dtype(b.dtype)));
      bind_in_place(name, own);
      held_.erase(name);
      it = staged_.emplace(name, own).first;
    }
    it->second.copy_(t.reshape(b.shape));
  }

  // cuda: the export launched on `stream` (PyTorch's current stream, torch.cuda.current_stream()
  // .cuda_stream), nothing waited for on the host: the inputs set and the outputs' copies are on
  // that stream too, so the call is ordered like any PyTorch op's. Each output a fresh tensor.
  std::vector<at::Tensor> run_on(int64_t stream) {
    TORCH_CHECK(cuda_, "emmy: run_on(stream) runs a cuda export; this one is ", backend(),
                " (run() instead)");
    model_.enqueue(static_cast<uint64_t>(stream));
    std::vector<at::Tensor> out;
    for (const BufferInfo& b : model_.outputs()) out.push_back(output_tensor(b));
    return out;
  }

  // Runs the export; each output as a fresh tensor (its own memory, valid after the next run).
  std::vector<at::Tensor> run() {
    if (cuda_) {
      // The inputs were written on PyTorch's streams; the runtime launches on a stream of its
      // own that does not wait for them.
      torch::cuda::synchronize(device_index_);
      model_.run_on_device();
    } else {
      model_.run();
    }
    std::vector<at::Tensor> out;
    for (const BufferInfo& b : model_.outputs()) out.push_back(output_tensor(b));
    return out;
  }

 private:
  static std::vector<std::string> names(const std::vector<BufferInfo>& list) {
    std::vector<std::string> out;
    for (const BufferInfo& b : list) out.push_back(b.name);
    return out;
  }

  const BufferInfo& info(const std::string& name) const {
    for (const auto* list : {&model_.plan().inputs, &model_.plan().outputs})
      for (uint32_t i : *list)
        if (model_.plan().buffers[i].name == name) return model_.plan().buffers[i];
    throw std::invalid_argument("emmy: " + model_.plan().graph_name +
                                " has no input or output named '" + name +
                                "' (inputs: " + listing(input_names()) + ")");
  }

  static std::string listing(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 12; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > 12) out += ", ... (" + std::to_string(names.size()) + " in all)";
    return out;
  }

  // The input's plan entry, after checking `t` against it: device, dtype, shape (a tensor of the
  // same element count, e.g. a [B*S, H] view of [B, S, H], is accepted), in that order.
  const BufferInfo& checked_info(const std::string& name, const at::Tensor& t) const {
    const BufferInfo& b = info(name);
    bool is_input = false;
    for (uint32_t i : model_.plan().inputs) is_input |= model_.plan().buffers[i].name == name;
    TORCH_CHECK(is_input, "emmy: '", name, "' is an output of ", model_.plan().graph_name,
                ", not an input");
    TORCH_CHECK(t.defined(), "emmy: input '", name, "': an undefined tensor");
    TORCH_CHECK(cuda_ ? t.is_cuda() : t.is_cpu(), "emmy: input '", name, "': the export runs on ",
                backend(), ", the tensor is on ", t.device().str(),
                cuda_ ? " (move it with .cuda())" : " (move it with .cpu())");
    TORCH_CHECK(t.scalar_type() == torch_dtype(b.dtype), "emmy: input '", name, "' is ", b.dtype,
                " in the export, the tensor is ", t.scalar_type(), " (convert it with .to())");
    int64_t count = 1;
    for (int64_t d : b.shape) count *= d;
    TORCH_CHECK(t.numel() == count, "emmy: input '", name, "' has shape ",
                c10::IntArrayRef(b.shape), " in the export, the tensor ", t.sizes());
    return b;
  }

  at::Tensor checked_input(const std::string& name, const at::Tensor& t) const {
    checked_info(name, t);
    return t.contiguous();  // in place means row-major: a strided tensor is copied once here
  }

  void bind_in_place(const std::string& name, const at::Tensor& t) {
    const size_t bytes = t.numel() * t.element_size();
    if (cuda_) {
      model_.bind_device(name, reinterpret_cast<uint64_t>(t.data_ptr()), bytes);
      device_index_ = t.device().index();
    } else {
      model_.bind_view(name, t.data_ptr(), bytes);
    }
  }

  at::Tensor output_tensor(const BufferInfo& b) const {
    const c10::ScalarType type = torch_dtype(b.dtype);
    TORCH_CHECK(type != c10::ScalarType::Undefined, "emmy: output '", b.name, "' is ", b.dtype,
                ", which torch has no dtype for");
    auto options = at::TensorOptions().dtype(type);
    void* data = cuda_ ? reinterpret_cast<void*>(model_.device_pointer(b.name))
                       : const_cast<void*>(model_.output(b.name));
    if (cuda_) options = options.device(c10::Device(c10::kCUDA, device_index_));
    return at::from_blob(data, b.shape, options).clone();
  }

  emmy::runtime::Model model_;
  bool cuda_;
  int device_index_ = 0;
  std::map<std::string, at::Tensor> held_;    // the caller's tensors bound in place
  std::map<std::string, at::Tensor> staged_;  // this model's own, filled by set
};

}  // namespace

TORCH_LIBRARY(emmy, m) {
  m.class_<TorchModel>("Model")
      .def(torch::init<std::string>())
      .def("backend", &TorchModel::backend)
      .def("graph_name", &TorchModel::graph_name)
      .def("input_names", &TorchModel::input_names)
      .def("output_names", &TorchModel::output_names)
      .def("unbound", &TorchModel::unbound)
      .def("role", &TorchModel::role)
      .def("dtype", &TorchModel::dtype)
      .def("shape", &TorchModel::shape)
      .def("bind", &TorchModel::bind)
      .def("set", &TorchModel::set)
      .def("run", &TorchModel::run)
      .def("run_on", &TorchModel::run_on);
}
