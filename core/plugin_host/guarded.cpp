#include "plugin_host/guarded.hpp"

#include <string>

#include "plugin_host/plugin_activity.hpp"

namespace emmy {
namespace {

// The plugin's identity, kept by the wrapper: the host's records may be replaced by a later
// discover(), the wrapper's copies live as long as the object.
class Identity {
 protected:
  Identity(const char* kind, const PluginRecord& r)
      : kind_(kind), name_(r.name), library_(r.library) {}
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

// A backend's in-process calls: capabilities, code generation and the host side of builds and
// measurements (the generated code itself runs in its worker processes).
class GuardedBackend final : public Backend, Identity {
 public:
  GuardedBackend(std::shared_ptr<Backend> inner, const PluginRecord& r)
      : Identity("backend", r), inner_(std::move(inner)) {}
  std::string name() const override {
    const auto a = activity("reporting its name");
    ActivityScope scope(a);
    return inner_->name();
  }
  BackendCaps capabilities() const override {
    const auto a = activity("reporting its capabilities");
    ActivityScope scope(a);
    return inner_->capabilities();
  }
  std::string environment_fingerprint() const override {
    const auto a = activity("reporting its environment fingerprint");
    ActivityScope scope(a);
    return inner_->environment_fingerprint();
  }
  Status build(const ir::Slice& slice, Regime regime, Artifact& artifact,
               MeasureResult& failure) noexcept override {
    const std::string templ = templates_of(slice);
    const auto a = activity("building a kernel of template", templ.c_str());
    ActivityScope scope(a);
    return inner_->build(slice, regime, artifact, failure);
  }
  Status measure(const ir::Slice& slice, const Artifact& artifact, const MeasureRequest& request,
                 MeasureResult& result) noexcept override {
    const std::string templ = templates_of(slice);
    const auto a = activity("measuring a kernel of template", templ.c_str());
    ActivityScope scope(a);
    return inner_->measure(slice, artifact, request, result);
  }
  Status add_template(std::shared_ptr<KernelTemplate> templ) noexcept override {
    const auto a = activity("taking a template plugin");
    ActivityScope scope(a);
    return inner_->add_template(std::move(templ));
  }

 private:
  // "matmul", or "matmul+pointwise" for a program of several kernels.
  static std::string templates_of(const ir::Slice& slice) {
    std::string out;
    for (const auto& k : slice.grouping.kernels) out += (out.empty() ? "" : "+") + k.templ;
    return out;
  }
  std::shared_ptr<Backend> inner_;
};

// A template plugin's calls, made by the backend it extends, inside that backend's own calls: the
// innermost scope (the template's) is the one a crash names.
class GuardedTemplate final : public KernelTemplate, Identity {
 public:
  GuardedTemplate(std::shared_ptr<KernelTemplate> inner, const PluginRecord& r)
      : Identity("template", r), inner_(std::move(inner)) {}
  std::string name() const override {
    const auto a = activity("reporting its name");
    ActivityScope scope(a);
    return inner_->name();
  }
  std::string backend() const override {
    const auto a = activity("reporting its backend");
    ActivityScope scope(a);
    return inner_->backend();
  }
  std::string alternative_to() const override {
    const auto a = activity("reporting the template it is an alternative to");
    ActivityScope scope(a);
    return inner_->alternative_to();
  }
  std::vector<KnobSpec> knobs() const override {
    const auto a = activity("reporting its knobs");
    ActivityScope scope(a);
    return inner_->knobs();
  }
  std::vector<KnobConstraint> constraints() const override {
    const auto a = activity("reporting its knob constraints");
    ActivityScope scope(a);
    return inner_->constraints();
  }
  std::string fingerprint() const override {
    const auto a = activity("reporting its fingerprint");
    ActivityScope scope(a);
    return inner_->fingerprint();
  }
  Status generate(const ir::Graph& kernel, const std::map<std::string, double>& knobs,
                  GeneratedKernel& out, std::string& refusal) noexcept override {
    const auto a = activity("generating a kernel of graph", kernel.name.c_str());
    ActivityScope scope(a);
    return inner_->generate(kernel, knobs, out, refusal);
  }

 private:
  std::shared_ptr<KernelTemplate> inner_;
};

}  // namespace

std::shared_ptr<Backend> guarded(std::shared_ptr<Backend> inner, const PluginRecord& record) {
  return std::make_shared<GuardedBackend>(std::move(inner), record);
}
std::shared_ptr<KernelTemplate> guarded(std::shared_ptr<KernelTemplate> inner,
                                        const PluginRecord& record) {
  return std::make_shared<GuardedTemplate>(std::move(inner), record);
}
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
