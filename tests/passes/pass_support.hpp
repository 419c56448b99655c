// Test support for the passes: loading a pass plugin from the build tree, running a pipeline,
// and resolvers that answer forks by name and remember what was asked.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/fork.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"

namespace emmy::test {

// The pass plugin `name`, loaded with dlopen from EMMY_BUILD_DIR/lib/emmy/plugins, created with
// `options` ("key=value" lines, as the host passes a [plugin NAME] section).
std::shared_ptr<Pass> load_pass(const std::string& name, const std::string& options = "");
// Options per pass name ("key=value" lines), for run_passes and run_default.
using PassOptions = std::map<std::string, std::string>;

// Answers a fork by the option label given for the first matching name prefix (else option 0),
// and records every site it was asked.
class ScriptedResolver final : public Resolver {
 public:
  ScriptedResolver() = default;
  // {{"fuse_attention", "split"}, ...}: fork-name prefix -> option label.
  ScriptedResolver(std::initializer_list<std::pair<const std::string, std::string>> by_prefix)
      : by_prefix_(by_prefix) {}
  size_t choose(const ForkSite& site) override;
  std::vector<ForkSite> asked;
  std::vector<std::string> answered;  // label chosen per asked site

 private:
  std::map<std::string, std::string> by_prefix_;
};

// Runs the named passes in order on `program` (starting grouping is whatever program holds);
// fails the test on a pass error or an invalid grouping.
void run_passes(ir::Program& program, const std::vector<std::string>& passes, Resolver& resolver,
                const BackendCaps& caps = {}, const PassOptions& options = {});
// The default pipeline's passes in the order the host derives from their manifests' AFTER/BEFORE
// (plugin_host/pass_order.hpp; tests/plugin_host/pass_order_test.cpp checks that the two agree).
std::vector<std::string> default_pipeline();

// A program over `g` with the singleton grouping, run through the default pipeline.
ir::Program run_default(const ir::Graph& g, Resolver& resolver, const BackendCaps& caps = {},
                        const PassOptions& options = {});

// Caps with two knobs per template (values {1,2} and {4,8}): what a backend might declare.
BackendCaps test_caps();

// Eager attention as transformers writes it (GQA repeat_kv on k and v, scale, causal where,
// softmax in f32, @v, output transpose and reshape), q [1,4,8,16], k and v [1,2,8,16].
ir::Graph attention_block();

// The kernel holding node v.
const ir::Kernel& kernel_with(const ir::Program& p, ir::ValueId v);
// Indices of nodes of op `op`.
std::vector<ir::ValueId> nodes_of(const ir::Graph& g, ir::Op op);

}  // namespace emmy::test
