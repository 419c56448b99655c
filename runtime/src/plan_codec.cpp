// PlanData <-> the plan file (runtime/plan.fbs): written by `emmy export`, read by Model::load.
#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "emmy/runtime_plan.hpp"
#include "plan_generated.h"

namespace emmy::runtime {
namespace {

namespace fb = emmy::rt::fb;

// Bounds for the verifier: a plan of the whole 28-layer model has a few thousand buffers and
// kernels; these leave room for far larger ones while refusing absurd nesting.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
constexpr flatbuffers::uoffset_t kMaxTables = 10'000'000;

template <typename T>
std::vector<T> vec(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
}
std::string str(const flatbuffers::String* s) {
  return s ? s->str() : std::string();
}

std::string describe_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The rules a plan keeps (encode_plan refuses to write one breaking them, decode_plan to read one).
void check_plan(const PlanData& p, const std::string& where) {
  auto fail = [&](const std::string& why) { throw Error(where + ": " + why); };
  if (p.backend.empty()) fail("the plan names no backend");
  if (p.environment.empty()) fail("the plan has no environment fingerprint");
  const size_t n = p.buffers.size();
  for (size_t i = 0; i < n; ++i) {
    const BufferInfo& b = p.buffers[i];
    const uint64_t size = dtype_size(b.dtype);
    if (size == 0)
      fail("buffer " + std::to_string(i) + " ('" + b.name + "') has unknown dtype '" + b.dtype +
           "'");
    uint64_t elements = 1;
    for (int64_t d : b.shape) {
      if (d < 0 || (d > 0 && elements > (uint64_t{1} << 40) / static_cast<uint64_t>(d)))
        fail("buffer '" + b.name + "' has an impossible shape " + describe_shape(b.shape));
      elements *= static_cast<uint64_t>(d);
    }
    if (b.bytes != elements * size)
      fail("buffer '" + b.name + "' says " + std::to_string(b.bytes) + " bytes, but " + b.dtype +
           describe_shape(b.shape) + " is " + std::to_string(elements * size));
  }
  auto check_indices = [&](const std::vector<uint32_t>& list, const std::string& what) {
    for (uint32_t b : list)
      if (b >= n) fail(what + " names buffer " + std::to_string(b) + " of " + std::to_string(n));
  };
  check_indices(p.inputs, "the graph inputs' list");
  check_indices(p.outputs, "the graph outputs' list");
  if (p.outputs.empty()) fail("the plan has no outputs");
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelInfo& kernel = p.kernels[k];
    const std::string what = "kernel " + std::to_string(k) + " ('" + kernel.name + "')";
    if (kernel.symbol.empty()) fail(what + " has no symbol");
    check_indices(kernel.inputs, what);
    check_indices(kernel.outputs, what);
  }
  check_indices(p.device_buffers, "the device buffer table");
  const size_t table = p.device_buffers.size();
  for (size_t t = 0; t < p.tensor_maps.size(); ++t) {
    const TensorMapInfo& m = p.tensor_maps[t];
    const size_t rank = m.dims.size();
    if (m.buffer >= table || rank < 1 || rank > 5 || m.strides_bytes.size() + 1 != rank ||
        m.box.size() != rank || dtype_size(m.dtype) == 0)
      fail("tensor map " + std::to_string(t) + " is inconsistent (buffer " +
           std::to_string(m.buffer) + " of a table of " + std::to_string(table) + ", rank " +
           std::to_string(rank) + ", dtype '" + m.dtype + "')");
  }
  for (const KernelInfo& kernel : p.kernels)
    for (size_t l = 0; l < kernel.launches.size(); ++l) {
      const LaunchInfo& launch = kernel.launches[l];
      const std::string what = "kernel '" + kernel.name + "' launch " + std::to_string(l) + " ('" +
                               (launch.is_step ? launch.step.prefix : launch.symbol) + "')";
      if (launch.is_step) {
        bool known = false;
        for (const StepLibraryInfo& lib : p.step_libraries)
          known |= lib.file == launch.step.library;
        if (!known)
          fail(what + " calls library '" + launch.step.library + "', which the plan lists not");
        for (uint32_t b : launch.step.buffers)
          if (b >= table)
            fail(what + " names device buffer " + std::to_string(b) + " of " +
                 std::to_string(table));
      } else if (launch.symbol.empty() || launch.grid.size() != 3 || launch.block.size() != 3) {
        fail(what + " has no symbol or not three grid and block sizes");
      }
    }
  for (const StepLibraryInfo& lib : p.step_libraries)
    if (lib.file.empty() || lib.file.find('/') != std::string::npos)
      fail("step library '" + lib.file + "' is not a file name inside the export folder");
  for (uint32_t b : p.inputs) {
    const std::string& role = p.buffers[b].role;
    if (role == "output" || role == "intermediate" || role == "scratch")
      fail("graph input '" + p.buffers[b].name + "' has role '" + role + "'");
  }
  // Names are how inputs are bound and outputs read: one buffer per name among them.
  std::vector<std::string> names;
  for (uint32_t b : p.inputs) names.push_back(p.buffers[b].name);
  for (uint32_t b : p.outputs) names.push_back(p.buffers[b].name);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) fail("a graph input or output has no name");
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j] &&
          !(i >= p.inputs.size() && j >= p.inputs.size() &&
            p.outputs[i - p.inputs.size()] == p.outputs[j - p.inputs.size()]))
        fail("two graph inputs or outputs are both named '" + names[i] + "'");
  }
}

}  // namespace

uint64_t dtype_size(std::string_view dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "i64" || dtype == "f64") return 8;
  if (dtype == "bool" || dtype == "u8") return 1;  // u8: a cuda program's scratch bytes
  return 0;
}

std::string digest(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be read");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read error");
  return digest(bytes);
}

std::string encode_plan(const PlanData& p) {
  check_plan(p, "plan to write");
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const BufferInfo& x : p.buffers)
    buffers.push_back(fb::CreateBufferDirect(b, x.name.c_str(), x.role.c_str(), x.dtype.c_str(),
                                             &x.shape, x.bytes, x.value_id));
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const KernelInfo& k : p.kernels) {
    std::vector<flatbuffers::Offset<fb::Launch>> launches;
    for (const LaunchInfo& l : k.launches) {
      flatbuffers::Offset<fb::LibraryStep> step = 0;
      if (l.is_step)
        step = fb::CreateLibraryStepDirect(b, l.step.library.c_str(), l.step.prefix.c_str(),
                                           &l.step.buffers, l.step.plan.c_str());
      launches.push_back(fb::CreateLaunchDirect(b, l.is_step ? nullptr : l.symbol.c_str(), &l.grid,
                                                &l.block, l.shared_bytes, step));
    }
    kernels.push_back(fb::CreateKernelDirect(
        b, k.name.c_str(), k.structural_key.c_str(), k.templ.c_str(), k.config.c_str(),
        k.symbol.c_str(), &k.inputs, &k.outputs, k.tuned_us, k.binary.c_str(), &k.grid, &k.block,
        k.shared_bytes, k.launches.empty() ? nullptr : &launches));
  }
  std::vector<flatbuffers::Offset<fb::TensorMap>> maps;
  for (const TensorMapInfo& m : p.tensor_maps)
    maps.push_back(fb::CreateTensorMapDirect(b, m.buffer, m.dtype.c_str(), m.swizzle_bytes, &m.dims,
                                             &m.strides_bytes, &m.box));
  std::vector<flatbuffers::Offset<fb::StepLibrary>> libraries;
  for (const StepLibraryInfo& l : p.step_libraries)
    libraries.push_back(
        fb::CreateStepLibraryDirect(b, l.file.c_str(), l.digest.c_str(), l.abi_version));
  const bool cuda = !p.device_buffers.empty() || !p.device.empty();
  std::vector<uint8_t> graph(p.graph.begin(), p.graph.end());
  auto plan = fb::CreatePlanDirect(
      b, p.backend.c_str(), p.environment.c_str(), p.emmy_version.c_str(), p.source.c_str(),
      p.graph_name.c_str(), p.graph_key.c_str(), p.run_id.c_str(), p.created_unix, p.binary.c_str(),
      p.binary_digest.c_str(), &buffers, &kernels, &p.inputs, &p.outputs, &graph, p.tuned_total_us,
      cuda ? &p.device_buffers : nullptr, cuda ? &maps : nullptr, cuda ? &libraries : nullptr,
      cuda ? p.device.c_str() : nullptr, cuda ? p.arch.c_str() : nullptr,
      p.kernels_await_producers);
  b.Finish(plan);
  std::string_view inner(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());

  flatbuffers::FlatBufferBuilder file(b.GetSize() + 1024);
  // Aligned so that the nested plan's tables are aligned in a file read into aligned memory.
  file.ForceVectorAlignment(inner.size(), sizeof(uint8_t), 16);
  auto payload = file.CreateVector(reinterpret_cast<const uint8_t*>(inner.data()), inner.size());
  auto root = fb::CreatePlanFile(file, p.format_version, payload, file.CreateString(digest(inner)));
  file.Finish(root, kPlanIdentifier);
  return std::string(reinterpret_cast<const char*>(file.GetBufferPointer()), file.GetSize());
}

PlanData decode_plan(std::string_view bytes, const std::string& where) {
  auto fail = [&](const std::string& why) -> PlanData { throw Error(where + ": " + why); };
  if (bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(bytes.data(), kPlanIdentifier))
    return fail("not an Emmy export plan (no '" + std::string(kPlanIdentifier) + "' identifier; " +
                std::to_string(bytes.size()) + " bytes)");
  // Copied into 16-byte-aligned memory: the verifier checks every field's alignment.
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8 + 1);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  const auto* data = reinterpret_cast<const uint8_t*>(aligned.data());
  {
    flatbuffers::Verifier v(data, bytes.size(), kMaxDepth, kMaxTables);
    if (!fb::VerifyPlanFileBuffer(v))
      return fail("damaged plan file (the FlatBuffers verifier refuses it)");
  }
  const fb::PlanFile* file = fb::GetPlanFile(data);
  if (file->format_version() != kPlanFormatVersion)
    return fail("plan format version " + std::to_string(file->format_version()) +
                ", this runtime reads version " + std::to_string(kPlanFormatVersion) +
                " (export again with the emmy of this runtime)");
  if (!file->plan() || file->plan()->size() == 0) return fail("damaged plan file (no plan inside)");
  std::string_view inner(reinterpret_cast<const char*>(file->plan()->data()), file->plan()->size());
  if (digest(inner) != file->plan_digest()->str())
    return fail("damaged plan file (its digest is " + digest(inner) + ", the file says " +
                file->plan_digest()->str() + ")");
  std::vector<uint64_t> inner_aligned((inner.size() + 7) / 8 + 1);
  std::memcpy(inner_aligned.data(), inner.data(), inner.size());
  const auto* inner_data = reinterpret_cast<const uint8_t*>(inner_aligned.data());
  {
    flatbuffers::Verifier v(inner_data, inner.size(), kMaxDepth, kMaxTables);
    if (!v.VerifyBuffer<fb::Plan>(nullptr))
      return fail("damaged plan (the FlatBuffers verifier refuses it)");
  }
  const fb::Plan* plan = flatbuffers::GetRoot<fb::Plan>(inner_data);
  PlanData p;
  p.format_version = file->format_version();
  p.backend = str(plan->backend());
  p.environment = str(plan->environment());
  p.emmy_version = str(plan->emmy_version());
  p.source = str(plan->source());
  p.graph_name = str(plan->graph_name());
  p.graph_key = str(plan->graph_key());
  p.run_id = str(plan->run_id());
  p.created_unix = plan->created_unix();
  p.binary = str(plan->binary());
  p.binary_digest = str(plan->binary_digest());
  if (plan->buffers())
    for (const fb::Buffer* x : *plan->buffers())
      p.buffers.push_back({x->name()->str(), x->role()->str(), x->dtype()->str(), vec(x->shape()),
                           x->bytes(), x->value_id()});
  if (plan->kernels())
    for (const fb::Kernel* k : *plan->kernels()) {
      KernelInfo info;
      info.name = k->name()->str();
      info.structural_key = str(k->structural_key());
      info.templ = str(k->template_());
      info.config = str(k->config());
      info.symbol = k->symbol()->str();
      info.inputs = vec(k->inputs());
      info.outputs = vec(k->outputs());
      info.tuned_us = k->tuned_us();
      info.binary = str(k->binary());
      info.grid = vec(k->grid());
      info.block = vec(k->block());
      info.shared_bytes = k->shared_bytes();
      if (k->launches())
        for (const fb::Launch* l : *k->launches()) {
          LaunchInfo launch;
          launch.symbol = str(l->symbol());
          launch.grid = vec(l->grid());
          launch.block = vec(l->block());
          launch.shared_bytes = l->shared_bytes();
          if (const fb::LibraryStep* s = l->step()) {
            launch.is_step = true;
            launch.step = {s->library()->str(), s->prefix()->str(), str(s->plan()),
                           vec(s->buffers())};
          }
          info.launches.push_back(std::move(launch));
        }
      p.kernels.push_back(std::move(info));
    }
  p.inputs = vec(plan->inputs());
  p.outputs = vec(plan->outputs());
  if (plan->graph())
    p.graph.assign(reinterpret_cast<const char*>(plan->graph()->data()), plan->graph()->size());
  p.tuned_total_us = plan->tuned_total_us();
  p.device_buffers = vec(plan->device_buffers());
  if (plan->tensor_maps())
    for (const fb::TensorMap* m : *plan->tensor_maps())
      p.tensor_maps.push_back({m->buffer(), m->dtype()->str(), m->swizzle_bytes(), vec(m->dims()),
                               vec(m->strides_bytes()), vec(m->box())});
  if (plan->step_libraries())
    for (const fb::StepLibrary* l : *plan->step_libraries())
      p.step_libraries.push_back({l->file()->str(), str(l->digest()), l->abi_version()});
  p.device = str(plan->device());
  p.arch = str(plan->arch());
  p.kernels_await_producers = plan->kernels_await_producers();
  check_plan(p, where);
  return p;
}

}  // namespace emmy::runtime
