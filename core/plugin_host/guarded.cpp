#include "plugin_host/guarded.hpp"

#include <string>

#include "plugin_host/plugin_activity.hpp"

namespace emmy {
namespace {

// The plugin's identity, kept by the wrapper: the host's records may be replaced by a later
// discover(), the wrapper's copies live as long as the object.
class Identity {
 protected:
  Identity(const char* kind, const PluginRecord& r) : kind_(kind), name_(r.name), library_(r.library) {}
  PluginActivity activity(const char* what, const char* detail = nullptr) const {
    return {kind_, name_.c_str(), library_.c_str(), what, detail};
  }

 private:
  const char* kind_;
  std::string name_, library_;
};

class GuardedFrontend final : public Frontend, Identity {
 public:
  GuardedFrontend(std::shared_ptr<Frontend> inner, const PluginRecord& r)
      : Identity("frontend", r), inner_(std::move(inner)) {}
  std::string name() const override {
    const auto a = activity("reporting its name");
    ActivityScope scope(a);
    return inner_->name();
  }
  bool accepts(const FrontendRequest& request) const noexcept override {
    const auto a = activity("checking whether it reads", source(request));
    ActivityScope scope(a);
    return inner_->accepts(request);
  }
  Status load(const FrontendRequest& request, ir::Graph& graph) noexcept override {
    const auto a = activity("reading", source(request));
    ActivityScope scope(a);
    return inner_->load(request, graph);
  }

 private:
  static const char* source(const FrontendRequest& r) {
    return r.source.empty() ? r.code.c_str() : r.source.c_str();
  }
  std::shared_ptr<Frontend> inner_;
};

class GuardedPass final : public Pass, Identity {
 public:
  GuardedPass(std::shared_ptr<Pass> inner, const PluginRecord& r)
      : Identity("pass", r), inner_(std::move(inner)) {}
  std::string name() const override {
    const auto a = activity("reporting its name");
    ActivityScope scope(a);
    return inner_->name();
  }
  bool in_place() const override {
    const auto a = activity("reporting whether it is in-place");
    ActivityScope scope(a);
    return inner_->in_place();
  }
  Status run(ir::Program& program, PassContext& ctx) noexcept override {
    const auto a = activity("running pass on graph", program.graph.name.c_str());
    ActivityScope scope(a);
    return inner_->run(program, ctx);
  }

 private:
  std::shared_ptr<Pass> inner_;
};

class GuardedPrior final : public Prior, Identity {
 public:
  GuardedPrior(std::shared_ptr<Prior> inner, const PluginRecord& r)
      : Identity("prior", r), inner_(std::move(inner)) {}
  std::string name() const override {
    const auto a = activity("reporting its name");
    ActivityScope scope(a);
    return inner_->name();
  }
  Estimate predict(const KernelFeatures& f, const KnobAssignment& k) const noexcept override {
    const auto a = activity("predicting a time for a kernel of class", f.op_class.c_str());
    ActivityScope scope(a);
    return inner_->predict(f, k);
  }
  Status observe(const std::vector<PriorRow>& rows) noexcept override {
    const auto a = activity("learning from measured rows");
    ActivityScope scope(a);
    return inner_->observe(rows);
  }
  Status save(std::string& state) const noexcept override {
    const auto a = activity("saving its state");
    ActivityScope scope(a);
    return inner_->save(state);
  }
  Status load(const std::string& state) noexcept override {
    const auto a = activity("loading its state");
    ActivityScope scope(a);
    return inner_->load(state);
  }

 private:
  std::shared_ptr<Prior> inner_;
};

}  // namespace

std::shared_ptr<Frontend> guarded(std::shared_ptr<Frontend> inner, const PluginRecord& record) {
  return std::make_shared<GuardedFrontend>(std::move(inner), record);
}
std::shared_ptr<Pass> guarded(std::shared_ptr<Pass> inner, const PluginRecord& record) {
  return std::make_shared<GuardedPass>(std::move(inner), record);
}
std::shared_ptr<Prior> guarded(std::shared_ptr<Prior> inner, const PluginRecord& record) {
  return std::make_shared<GuardedPrior>(std::move(inner), record);
}

}  // namespace emmy
