#include "passes/pass_support.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "emmy/plugin.hpp"
#include "emmy/templates.hpp"
#include "plugin_host/manifest_reader.hpp"

namespace emmy::test {

std::shared_ptr<Pass> load_pass(const std::string& name, const std::string& options) {
  // The manifest names the library: several passes may share one (the lowering passes do).
  const std::string dir = std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/";
  const PluginRecord record = read_manifest(dir + name + ".emmy-manifest");
  if (!record.ok) throw std::runtime_error("pass " + name + ": " + record.reason);
  const std::string& path = record.library_path;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed, as the host does
  if (!lib) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto entry = reinterpret_cast<EmmyPluginInfoFn>(dlsym(lib, EMMY_PLUGIN_ENTRY_SYMBOL));
  if (!entry) throw std::runtime_error(path + " has no " EMMY_PLUGIN_ENTRY_SYMBOL);
  const EmmyPluginInfo* info = entry();
  while (info && info->abi_version == EMMY_SDK_ABI_VERSION && info->name && name != info->name)
    info = info->next;
  if (!info) throw std::runtime_error(path + " provides no pass " + name);
  if (info->abi_version != EMMY_SDK_ABI_VERSION || info->kind != EMMY_KIND_PASS)
    throw std::runtime_error(path + " is not a pass plugin of this SDK");
  char error[512] = {0};
  void* object = info->create(options.c_str(), nullptr, error, sizeof error);
  if (!object) throw std::runtime_error(std::string("creating pass ") + name + ": " + error);
  return std::shared_ptr<Pass>(static_cast<Pass*>(object), [info](Pass* p) { info->destroy(p); });
}

size_t ScriptedResolver::choose(const ForkSite& site) {
  asked.push_back(site);
  size_t answer = 0;
  for (const auto& [prefix, label] : by_prefix_) {
    if (site.name.rfind(prefix, 0) != 0) continue;
    for (size_t i = 0; i < site.options.size(); ++i)
      if (site.options[i].label == label) answer = i;
    break;
  }
  answered.push_back(site.options[answer].label);
  return answer;
}

void run_passes(ir::Program& program, const std::vector<std::string>& passes, Resolver& resolver,
                const BackendCaps& caps, const PassOptions& options) {
  PassContext ctx{resolver, caps};
  for (const std::string& name : passes) {
    auto given = options.find(name);
    std::shared_ptr<Pass> pass = load_pass(name, given == options.end() ? "" : given->second);
    ASSERT_EQ(pass->name(), name);
    Status s = pass->run(program, ctx);
    ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    ASSERT_EQ(ir::verify(program.graph), "") << "after " << name;
    ASSERT_EQ(ir::verify_grouping(program.graph, program.grouping), "") << "after " << name;
  }
}

std::vector<std::string> default_pipeline() {
  return {
      "fuse_horizontal",         "fold_views",          "fuse_attention",       "fuse_reduction",
      "fuse_attention_prologue", "fuse_gated_epilogue", "fuse_matmul_prologue", "fuse_epilogue",
      "fuse_pointwise",          "lower_attention",     "lower_matmul",         "lower_reduction",
      "lower_pointwise",         "lower_fallback"};
}

ir::Program run_default(const ir::Graph& g, Resolver& resolver, const BackendCaps& caps,
                        const PassOptions& options) {
  ir::Program p{g, ir::singleton_grouping(g)};
  run_passes(p, default_pipeline(), resolver, caps, options);
  return p;
}

BackendCaps test_caps() {
  BackendCaps caps;
  caps.backend = "test";
  for (const std::string& t : template_names())
    caps.templates[t] = {KnobSpec{"unroll", {1, 2}}, KnobSpec{"threads", {4, 8}}};
  return caps;
}

ir::Graph attention_block() {
  ir::Graph g;
  ir::Builder b(g);
  ir::ValueId q = b.input("q", {ir::DType::bf16, {1, 4, 8, 16}});
  ir::ValueId k = b.input("k", {ir::DType::bf16, {1, 2, 8, 16}});
  ir::ValueId v = b.input("v", {ir::DType::bf16, {1, 2, 8, 16}});
  ir::ValueId mask = b.input("mask", {ir::DType::boolean, {8, 8}}, "causal_mask");
  auto repeat = [&](ir::ValueId x) {
    ir::ValueId u = b.op(ir::Op::unsqueeze, {x}, {{"dim", int64_t{2}}});
    ir::ValueId e = b.op(ir::Op::expand, {u}, {{"shape", ir::Shape{1, 2, 2, 8, 16}}});
    return b.reshape(e, {1, 4, 8, 16});
  };
  ir::ValueId s = b.matmul(q, b.transpose(repeat(k), 2, 3));
  s = b.mul(s, b.constant(0.25));
  s = b.op(ir::Op::where, {mask, s, b.constant(-1e30)});
  ir::ValueId p = b.cast(b.softmax(b.cast(s, ir::DType::f32), 3), ir::DType::bf16);
  ir::ValueId o = b.matmul(p, repeat(v));
  b.output(b.reshape(b.op(ir::Op::contiguous, {b.transpose(o, 1, 2)}), {1, 8, 64}));
  return g;
}

const ir::Kernel& kernel_with(const ir::Program& p, ir::ValueId v) {
  for (const auto& k : p.grouping.kernels)
    for (ir::ValueId n : k.nodes)
      if (n == v) return k;
  throw std::runtime_error("no kernel holds node %" + std::to_string(v));
}

std::vector<ir::ValueId> nodes_of(const ir::Graph& g, ir::Op op) {
  std::vector<ir::ValueId> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == op) out.push_back(static_cast<ir::ValueId>(i));
  return out;
}

}  // namespace emmy::test
