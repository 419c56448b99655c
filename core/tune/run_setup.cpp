#include "tune/run_setup.hpp"

#include "plugin_host/pass_order.hpp"
#include "search/pipeline.hpp"

namespace emmy::tune {

std::string pick_frontend(const FrontendRequest& request, const std::string& named,
                          PluginHost& host, const std::string& described) {
  if (!named.empty()) return named;
  std::vector<std::string> tried;
  for (const PluginRecord* rec : host.of_kind("frontend")) {
    auto frontend = host.make_frontend(rec->name);
    if (frontend->accepts(request)) return rec->name;
    tried.push_back(rec->name);
  }
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t;
  throw BadInput("no frontend accepts '" + described +
                 "' (tried: " + (list.empty() ? "none found; see emmy plugins" : list) + ")");
}

ImportedGraph import_graph(const FrontendRequest& request, const std::string& named,
                           PluginHost& host, const std::string& described) {
  ImportedGraph out;
  std::shared_ptr<Frontend> frontend;
  try {
    out.frontend = pick_frontend(request, named, host, described);
    frontend = host.make_frontend(out.frontend);
  } catch (const BadInput&) {
    throw;
  } catch (const Error& e) {
    throw BadInput(e.what());
  }
  // A model the frontend refuses (a size over its bound, a .pt with load-time code, an unknown
  // op) is the user's input.
  if (Status st = frontend->load(request, out.graph); !st.ok())
    throw BadInput("frontend '" + out.frontend + "': " + st.message());
  if (std::string bad = ir::verify(out.graph); !bad.empty())
    throw Error("frontend '" + out.frontend + "' produced an invalid graph: " + bad);
  return out;
}

PassPipeline make_pipeline(const std::string& spec, PluginHost& host,
                           const OptionsByName& options) {
  PassPipeline p;
  try {
    p.names = resolve_pass_spec(spec, host);
  } catch (const Error& e) {
    throw BadInput((spec.empty() ? "the default pipeline: " : "--passes '" + spec + "': ") +
                   e.what());
  }
  for (const auto& name : p.names) {
    auto given = options.find(name);
    p.owned.push_back(
        host.make_pass(name, given == options.end() ? PluginOptions{} : given->second));
    p.passes.push_back(p.owned.back().get());
  }
  return p;
}

ir::Program run_pipeline_once(const ir::Graph& graph, const PassPipeline& pipeline,
                              Resolver& resolver, const BackendCaps& caps) {
  ir::Program program{graph, ir::singleton_grouping(graph)};
  search::run_pipeline(program, pipeline.passes, resolver, caps);
  return program;
}

std::string describe_source(const TuneOptions& o) {
  return o.code.empty() ? o.source : "--code " + o.code;
}

}  // namespace emmy::tune
