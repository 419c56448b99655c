// What a run starts from, shared by `emmy tune` and `emmy trace` (docs/DESIGN.md, Data flow of
// emmy tune): the frontend chosen and the graph it imports, the pass pipeline made from its spec,
// and the pipeline run once over the whole graph with the in-place check (search::run_pipeline).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/fork.hpp"
#include "emmy/frontend.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "plugin_host/plugin_host.hpp"
#include "tune/tune_options.hpp"

namespace emmy::tune {

// Options by plugin name ([plugin NAME] sections, --pass-option, --prior-option).
using OptionsByName = std::map<std::string, PluginOptions>;

// The frontend to use for `request`: `named` if set, else the first plugin that accepts it.
// Throws BadInput naming what was tried when none does; `described` names the source in it.
std::string pick_frontend(const FrontendRequest& request, const std::string& named,
                          PluginHost& host, const std::string& described);

struct ImportedGraph {
  std::string frontend;  // the frontend that produced it
  ir::Graph graph;
};

// The graph of `request` from frontend `named` (else the first that accepts it). Throws BadInput
// when no frontend accepts it, the frontend cannot be made or refuses the source (the user's
// input), and emmy::Error when the frontend produced an invalid graph.
ImportedGraph import_graph(const FrontendRequest& request, const std::string& named,
                           PluginHost& host, const std::string& described);

// The passes of a run, in pipeline order.
struct PassPipeline {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<Pass>> owned;
  std::vector<Pass*> passes;  // owned's, in the same order
};

// The pipeline `spec` names (--passes; "" = the default, ordered by the passes' manifests,
// plugin_host/pass_order.hpp). Throws BadInput when the spec cannot be resolved (the message
// says which spec), emmy::Error from the host when a pass cannot be made with its options.
PassPipeline make_pipeline(const std::string& spec, PluginHost& host, const OptionsByName& options);

// The whole graph as one kernel per node, through every pass of `pipeline` once, forks answered
// by `resolver`, structural passes checked to leave a valid program and in-place ones to change
// nothing but templates and knobs. Throws emmy::Error naming the pass that failed.
ir::Program run_pipeline_once(const ir::Graph& graph, const PassPipeline& pipeline,
                              Resolver& resolver, const BackendCaps& caps);

// TuneOptions' source in words ("--code EXPR" or the model id / file).
std::string describe_source(const TuneOptions& options);

}  // namespace emmy::tune
