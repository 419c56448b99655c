#include "plugin_host/plugin_host.hpp"

#include <array>

#include "emmy/status.hpp"
#include "plugin_host/guarded.hpp"
#include "plugin_host/library_loader.hpp"
#include "plugin_host/plugin_activity.hpp"

namespace emmy {

void PluginHost::discover(const std::vector<std::string>& paths) {
  found_ = discover_plugins(paths);
}

const PluginRecord* PluginHost::find(std::string_view name, std::string_view kind) const {
  const PluginRecord* refused = nullptr;
  for (const auto& r : found_.records) {
    if (r.name != name || (!kind.empty() && r.kind != kind)) continue;
    if (r.ok) return &r;
    if (!refused) refused = &r;
  }
  return refused;
}

std::vector<const PluginRecord*> PluginHost::of_kind(std::string_view kind) const {
  std::vector<const PluginRecord*> out;
  for (const auto& r : found_.records)
    if (r.ok && r.kind == kind) out.push_back(&r);
  return out;
}

const PluginRecord& PluginHost::select(std::string_view name, std::string_view kind) const {
  if (const PluginRecord* r = find(name, kind)) {
    if (!r->ok)
      throw Error(std::string(kind) + " plugin '" + std::string(name) + "' (" + r->manifest_path +
                  ") was refused: " + r->reason);
    return *r;
  }
  if (const PluginRecord* other = find(name))
    throw Error("plugin '" + std::string(name) + "' is a " + other->kind + " plugin, not a " +
                std::string(kind));
  std::string available;
  for (const auto* r : of_kind(kind)) available += (available.empty() ? "" : ", ") + r->name;
  std::string searched;
  for (const auto& d : found_.dirs) searched += (searched.empty() ? "" : ", ") + d.path;
  throw Error("no " + std::string(kind) + " plugin named '" + std::string(name) +
              "' (available: " + (available.empty() ? "none" : available) +
              "; searched: " + (searched.empty() ? "nothing" : searched) +
              "); add its folder with --plugin-path or EMMY_PLUGIN_PATH");
}

const EmmyPluginInfo& PluginHost::load(std::string_view name, std::string_view kind) {
  return load_plugin_entry(select(name, kind));
}

namespace {

// Every option given must be one the manifest declares (its OPTIONS): a misspelt name would
// otherwise be ignored silently and the run go on with the default.
void check_declared_options(const PluginRecord& record, const PluginOptions& options) {
  for (const auto& [key, value] : options) {
    bool declared = false;
    for (const ManifestOption& o : record.options) declared = declared || o.name == key;
    if (declared) continue;
    std::string known;
    for (const ManifestOption& o : record.options) known += (known.empty() ? "" : ", ") + o.name;
    throw Error(record.kind + " plugin '" + record.name + "' has no option '" + key + "' (" +
                (known.empty() ? "it takes none" : "it takes: " + known) +
                "; their help: emmy plugins --json --kind " + record.kind + ")");
  }
}

// The manifest's defaults for every option not given, so that the manifest is the one place a
// default is written (docs/PLUGINS.md, Options). An empty default means "none": the plugin works
// one out itself (a path under $EMMY_HOME, the machine's core count), so it is left out.
PluginOptions with_defaults(const PluginRecord& record, const PluginOptions& options) {
  PluginOptions out = options;
  for (const ManifestOption& o : record.options)
    if (!o.default_value.empty() && !out.count(o.name)) out[o.name] = o.default_value;
  return out;
}

}  // namespace

PluginOptions PluginHost::options_for(std::string_view name, std::string_view kind,
                                      const PluginOptions& options) const {
  const PluginRecord& record = select(name, kind);
  check_declared_options(record, options);
  return with_defaults(record, options);
}

std::shared_ptr<void> PluginHost::make(std::string_view name, std::string_view kind,
                                       const PluginOptions& options) {
  // The manifest answers for the options: a wrong one is refused before the library is loaded.
  const PluginRecord& record = select(name, kind);
  check_declared_options(record, options);
  const EmmyPluginInfo& info = load_plugin_entry(record);
  std::array<char, 2048> error{};
  const std::string text = format_plugin_options(with_defaults(record, options));
  const std::string kind_text(kind);
  const PluginActivity creating{kind_text.c_str(), record.name.c_str(), record.library.c_str(),
                                "creating its object", nullptr};
  void* object = nullptr;
  {
    const PluginContextView context(context_);
    ActivityScope scope(creating);
    object = info.create(text.c_str(), context.get(), error.data(), error.size());
  }
  if (!object) {
    error.back() = '\0';  // whatever the plugin wrote, the message ends inside the buffer
    std::string message = error[0] ? error.data() : "create() failed without a message";
    throw Error(std::string(kind) + " plugin '" + std::string(name) +
                "' could not be created: " + message);
  }
  // The library is never unloaded, so the plugin's destroy() stays valid for the deleter.
  auto destroy = info.destroy;
  return std::shared_ptr<void>(object, [destroy](void* p) { destroy(p); });
}

// create() hands out the interface pointer as void* (plugin.hpp), so a static_cast recovers it.
template <typename T>
static std::shared_ptr<T> as(std::shared_ptr<void> object) {
  return std::shared_ptr<T>(object, static_cast<T*>(object.get()));
}

// Every plugin object runs inside the emmy process: wrapped so that a crash in one names it
// (plugin_host/guarded.hpp). A backend's generated code runs in its worker processes instead.
std::shared_ptr<Frontend> PluginHost::make_frontend(std::string_view name,
                                                    const PluginOptions& options) {
  auto object = as<Frontend>(make(name, "frontend", options));
  return guarded(std::move(object), select(name, "frontend"));
}
std::shared_ptr<Pass> PluginHost::make_pass(std::string_view name, const PluginOptions& options) {
  auto object = as<Pass>(make(name, "pass", options));
  return guarded(std::move(object), select(name, "pass"));
}
std::vector<const PluginRecord*> PluginHost::templates_for(std::string_view backend) const {
  std::vector<const PluginRecord*> out;
  for (const PluginRecord* r : of_kind("template"))
    if (r->extends == backend) out.push_back(r);
  return out;
}

std::shared_ptr<Backend> PluginHost::make_backend(std::string_view name,
                                                  const PluginOptions& options) {
  std::shared_ptr<Backend> backend =
      guarded(as<Backend>(make(name, "backend", options)), select(name, "backend"));
  for (const PluginRecord* r : templates_for(name)) {
    std::shared_ptr<KernelTemplate> templ = make_template(r->name);
    Status taken = backend->add_template(std::move(templ));
    if (!taken.ok())
      throw Error("template plugin '" + r->name + "' (" + r->manifest_path + ") extends the " +
                  std::string(name) + " backend, which refuses it: " + taken.message() +
                  "; remove it from the plugin path or rebuild it for this backend");
  }
  return backend;
}
std::shared_ptr<Prior> PluginHost::make_prior(std::string_view name, const PluginOptions& options) {
  auto object = as<Prior>(make(name, "prior", options));
  return guarded(std::move(object), select(name, "prior"));
}
std::shared_ptr<KernelTemplate> PluginHost::make_template(std::string_view name,
                                                          const PluginOptions& options) {
  return guarded(as<KernelTemplate>(make(name, "template", options)), select(name, "template"));
}

}  // namespace emmy
