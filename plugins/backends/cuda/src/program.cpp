// Slices holding several kernels (the tuner's assembled program, or a kernel with its attention
// producer): each kernel is generated with its own template from its own slice, then the
// modules are stitched into one: kernel names prefixed, buffer-table indices renumbered into one
// table (the graph's inputs, its outputs, then intermediates and every module's scratch, then
// one table of every module's TMA tensor maps), and
// the launches concatenated in an order where every kernel runs after its producers. Library
// steps (template plugins', emmy/cuda_step.h) keep their place in that order, their buffer
// lists renumbered.
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "emmy/status.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

namespace {

// The kernels' definitions (everything from the first kernel on), without prelude or plan.
std::string kernel_text(const std::string& source) {
  size_t at = source.find("extern \"C\" __global__");
  return at == std::string::npos ? "" : source.substr(at);
}

// Stands for the tensor-map table's index until the program's last scratch buffer is known.
const std::string kTmapsSlot = "@EMMY_TMAPS@";

// Replaces every emmy_buf[<local>] by emmy_buf[<global>]. With `tmaps_offset` (a module with
// tensor maps), the entry one past the module's buffers, its tensor-map table, becomes the
// program's table (kTmapsSlot) advanced by that many bytes: the maps of earlier modules.
std::string renumber(const std::string& text, const std::vector<int64_t>& global,
                     std::optional<size_t> tmaps_offset) {
  static const std::string key = "emmy_buf[";
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t at = text.find(key, pos);
    if (at == std::string::npos) break;
    size_t digits = at + key.size(), end = digits;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    out += text.substr(pos, digits - pos);
    if (end > digits && end < text.size() && text[end] == ']') {
      size_t local = std::stoul(text.substr(digits, end - digits));
      if (tmaps_offset && local == global.size()) {
        out += kTmapsSlot + "] + " + std::to_string(*tmaps_offset) + "ull";
        pos = end + 1;  // past the ']' already written
        continue;
      }
      if (local >= global.size())
        throw Error("cuda backend: generated module indexes buffer " + std::to_string(local) +
                    " of " + std::to_string(global.size()));
      out += std::to_string(global[local]);
      pos = end;
    } else {
      pos = digits;
    }
  }
  return out + text.substr(pos);
}

// What a kernel's generated source depends on: its slice's graph, its template and its knobs.
// Names are left out for the built-in templates, which never read them (identical kernels of
// different layers then share one key); a template plugin's module may, so its key keeps them.
std::string generation_key(const ir::Slice& sub, const TemplatePlugins& plugins) {
  const ir::Kernel& k = sub.grouping.kernels.back();
  std::string key = k.templ + "|";
  for (const auto& [name, v] : k.knobs) key += name + "=" + std::to_string(v) + ",";
  if (plugins.count(k.templ)) return key + "\n" + ir::print(sub.graph);
  ir::Graph anonymous = sub.graph;
  anonymous.name.clear();
  for (ir::Node& n : anonymous.nodes) n.name.clear();
  return key + "\n" + ir::print(anonymous);
}

}  // namespace

std::string generate_program(const ir::Slice& slice, const TemplatePlugins& plugins) {
  const ir::Graph& g = slice.graph;
  const auto ins = g.inputs();
  const int64_t n_fixed = int64_t(ins.size() + g.outputs.size());
  std::map<ir::ValueId, int64_t> where;  // value -> global buffer index
  for (size_t i = 0; i < ins.size(); ++i) where[ins[i]] = int64_t(i);
  for (size_t k = 0; k < g.outputs.size(); ++k)
    where.emplace(g.outputs[k], int64_t(ins.size() + k));
  Plan plan;
  // Every kernel of the program awaits its producers when every module's does (the byte
  // copies below are written that way too).
  plan.awaits_producers = true;
  std::string kernels, notes;
  auto new_scratch = [&](int64_t bytes) {
    plan.scratch_bytes.push_back(std::max<int64_t>(bytes, 1));
    return n_fixed + int64_t(plan.scratch_bytes.size()) - 1;
  };

  std::map<std::string, std::pair<std::string, std::string>> generated;  // key -> source, used
  std::vector<bool> done(slice.grouping.kernels.size(), false);
  std::set<ir::ValueId> available(ins.begin(), ins.end());
  for (size_t round = 0; round < done.size(); ++round) {
    size_t pick = done.size();
    for (size_t i = 0; i < done.size() && pick == done.size(); ++i) {
      if (done[i]) continue;
      bool ready = true;
      for (ir::ValueId v : ir::boundary(g, slice.grouping.kernels[i]).inputs)
        ready = ready && available.count(v);
      if (ready) pick = i;
    }
    if (pick == done.size())
      throw Error("cuda backend: the slice's kernels depend on each other in a cycle");
    done[pick] = true;
    const ir::Kernel& kernel = slice.grouping.kernels[pick];
    ir::Slice sub = ir::make_slice(g, kernel);
    // The same kernel of every layer is generated once: its source depends on its slice's
    // structure, template and knobs, not on which layer it came from. A 28-layer model is 281
    // kernels of 11 kinds, and generating the attention alone takes ~10 ms at B=8 (its operand
    // layouts are proven row by row on the host): this is most of what `emmy export` spends.
    auto& [source, used] = generated[generation_key(sub, plugins)];
    if (source.empty()) source = generate_source(sub, &used, plugins);
    Plan sub_plan = parse_plan(source);
    plan.awaits_producers =
        plan.awaits_producers && (sub_plan.awaits_producers || !sub_plan.has_kernels());
    // Local buffer i of the sub-module -> global index.
    std::vector<int64_t> global;
    for (ir::ValueId v : sub.graph.inputs()) global.push_back(where.at(sub.origin.at(size_t(v))));
    for (ir::ValueId v : sub.graph.outputs) {
      ir::ValueId origin = sub.origin.at(size_t(v));
      if (!where.count(origin)) where[origin] = new_scratch(g.type(origin).bytes());
      global.push_back(where.at(origin));
      available.insert(origin);
    }
    for (int64_t bytes : sub_plan.scratch_bytes) global.push_back(new_scratch(bytes));
    std::string prefix = "k" + std::to_string(pick) + "_";
    // One tensor-map table for the whole program: this module's maps follow the earlier ones.
    std::optional<size_t> tmaps_offset;
    if (!sub_plan.tensor_maps.empty()) tmaps_offset = plan.tensor_maps.size() * 128;
    std::string text = renumber(kernel_text(source), global, tmaps_offset);
    for (TensorMap t : sub_plan.tensor_maps) {
      t.buffer = global.at(size_t(t.buffer));
      plan.tensor_maps.push_back(t);
    }
    for (Launch l : sub_plan.launches) {
      l.group = int64_t(round);
      if (l.is_library()) {
        // A library step (a template plugin's): its buffer list renumbered like the kernels'
        // buffers; its plan numbers that list, so it is passed on unread.
        for (int64_t& b : l.step->buffers) b = global.at(size_t(b));
        plan.launches.push_back(l);
        continue;
      }
      text = replace_all(text, ") " + l.kernel + "(void* const*",
                         ") " + prefix + l.kernel + "(void* const*");
      l.kernel = prefix + l.kernel;
      plan.launches.push_back(l);
    }
    kernels += text;
    notes += "// kernel " + std::to_string(pick) + ": " + used + "\n";
  }
  // Outputs held elsewhere (an input, or listed twice): byte copies into their slots.
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    int64_t slot = int64_t(ins.size() + k), src = where.at(g.outputs[k]);
    if (src == slot) continue;
    int64_t bytes = g.type(g.outputs[k]).bytes();
    std::string name = "emmy_copy" + std::to_string(k);
    kernels += "extern \"C\" __global__ void __launch_bounds__(256) " + name +
               "(void* const* __restrict__ emmy_buf) {\n"
               "  emmy_await_producers();\n"
               "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
               "  if (i < " +
               std::to_string(bytes) + "LL) ((unsigned char*)emmy_buf[" + std::to_string(slot) +
               "])[i] = ((const unsigned char*)emmy_buf[" + std::to_string(src) + "])[i];\n}\n\n";
    Launch l;
    l.kernel = name;
    l.grid[0] = std::max<int64_t>(1, ceil_div(bytes, 256));
    l.block = 256;
    l.group =
        plan.launches.empty() ? 0 : plan.launches.back().group;  // part of the last kernel's time
    plan.launches.push_back(l);
  }
  // The tensor-map table follows every buffer (the worker appends it to the table).
  kernels = replace_all(kernels, kTmapsSlot,
                        std::to_string(n_fixed + int64_t(plan.scratch_bytes.size())));
  return device_prelude() + "// template: program of " +
         std::to_string(slice.grouping.kernels.size()) + " kernels\n" + notes + render_plan(plan) +
         "\n" + kernels;
}

}  // namespace emmy::cuda
