// The plugin host: what the run config selects is found here, loaded, checked and created.
//
//   PluginHost host;
//   host.discover(default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths));
//   std::shared_ptr<emmy::Backend> backend = host.make_backend("cpu");
//
// Discovery reads manifests only; a library is loaded the first time one of its objects is made
// (or load() is called) and never unloaded. Objects are destroyed by the plugin that made them
// (the shared_ptr's deleter calls its destroy()).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emmy/plugin.hpp"
#include "plugin_host/discovery.hpp"
#include "plugin_host/plugin_context.hpp"
#include "plugin_host/plugin_record.hpp"

namespace emmy {

class PluginHost {
 public:
  // Replaces what was discovered before with what `paths` hold (see discover_plugins).
  void discover(const std::vector<std::string>& paths);

  // What every plugin made from now on is told (emmy/plugin_context.hpp): by default emmy's home,
  // its cache folder and the environment of this process (plugin_context_from_environment).
  void set_context(PluginContext context) { context_ = std::move(context); }
  const PluginContext& context() const { return context_; }

  const std::vector<PluginRecord>& records() const { return found_.records; }
  const std::vector<SearchDir>& search_dirs() const { return found_.dirs; }

  // The accepted record with this name (and kind, unless `kind` is empty); failing that the first
  // refused one (check ->ok); nullptr when no manifest has the name.
  const PluginRecord* find(std::string_view name, std::string_view kind = {}) const;
  // Accepted records of a kind, in discovery order.
  std::vector<const PluginRecord*> of_kind(std::string_view kind) const;

  // The accepted record with this name and kind. Throws emmy::Error naming what was found
  // instead (a refused manifest and why, another kind, or what is available and where it looked).
  const PluginRecord& record(std::string_view name, std::string_view kind) const {
    return select(name, kind);
  }

  // Loads the plugin's library and checks its entry point against the manifest. Throws
  // emmy::Error (unknown name, wrong kind, refused, or a failed check) saying what to do.
  const EmmyPluginInfo& load(std::string_view name, std::string_view kind);

  // Creates the plugin's object with `options` ("--option NAME=VALUE") and, for every option not
  // given, the manifest's default (when not empty); throws emmy::Error with load()'s messages,
  // for an option its manifest does not declare (naming the ones it does), or with the plugin's
  // own create() error.
  // What create() would receive: `options` checked against the manifest, its defaults added.
  PluginOptions options_for(std::string_view name, std::string_view kind,
                            const PluginOptions& options) const;

  std::shared_ptr<Frontend> make_frontend(std::string_view name, const PluginOptions& options = {});
  std::shared_ptr<Pass> make_pass(std::string_view name, const PluginOptions& options = {});
  // The backend, with every accepted template plugin whose manifest EXTENDS it handed over
  // (Backend::add_template, in discovery order): templates need no flag, installing one is
  // enough, and `emmy plugins` lists what a backend will get. A template that cannot be created
  // or that the backend refuses stops with an error naming the template plugin.
  std::shared_ptr<Backend> make_backend(std::string_view name, const PluginOptions& options = {});
  std::shared_ptr<Prior> make_prior(std::string_view name, const PluginOptions& options = {});
  std::shared_ptr<KernelTemplate> make_template(std::string_view name,
                                                const PluginOptions& options = {});
  // Accepted template plugins extending `backend`, in discovery order.
  std::vector<const PluginRecord*> templates_for(std::string_view backend) const;

 private:
  // The object create() returned (the interface pointer, as void*), destroyed by the plugin.
  std::shared_ptr<void> make(std::string_view name, std::string_view kind,
                             const PluginOptions& options);
  const PluginRecord& select(std::string_view name, std::string_view kind) const;

  Discovery found_;
  PluginContext context_ = plugin_context_from_environment();
};

}  // namespace emmy
