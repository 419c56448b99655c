#include "plugin_host/library_loader.hpp"

#include <boost/dll/shared_library.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "emmy/status.hpp"

namespace emmy {
namespace {

struct Registry {
  std::mutex mutex;
  // library path -> the loaded library; entries are only ever added.
  std::map<std::string, boost::dll::shared_library> libraries;
};

Registry& registry() {
  // Deliberately leaked: destroying it would unload plugins while objects they made may live on.
  static Registry* r = new Registry;
  return *r;
}

// Boost.DLL's message carries dlerror()'s text in parentheses; that is the useful part.
std::string load_failure(const std::string& what) {
  const std::string marker = "(dlerror system message: ";
  auto start = what.find(marker);
  if (start == std::string::npos) return what;
  start += marker.size();
  auto end = what.rfind(')');
  return what.substr(start,
                     end == std::string::npos || end < start ? std::string::npos : end - start);
}

std::string quoted(const char* s) {
  return s ? "'" + std::string(s) + "'" : "(null)";
}

// More entries than any library means: a chain that loops or runs into garbage.
constexpr size_t kMaxEntries = 256;

// The names of a library's entries, quoted and comma-separated (for messages).
std::string provided_names(const EmmyPluginInfo* first) {
  std::string out;
  size_t n = 0;
  for (const EmmyPluginInfo* e = first; e && n < kMaxEntries; e = e->next, ++n)
    out += (out.empty() ? "" : ", ") + quoted(e->name);
  return out;
}

// The entry of a library's chain (plugin.hpp: EmmyPluginInfo::next) called `name`, or nullptr.
// A malformed chain (an entry of another ABI, a nameless entry, a name twice, a loop) is refused
// naming the offending entry: which of two same-named entries was meant cannot be told.
const EmmyPluginInfo* entry_named(const EmmyPluginInfo* first, const std::string& name,
                                  const std::string& who) {
  const EmmyPluginInfo* found = nullptr;
  std::set<std::string> seen;
  size_t n = 0;
  for (const EmmyPluginInfo* e = first; e; e = e->next, ++n) {
    if (n == kMaxEntries)
      throw Error(who + ": the library's entry chain has over " + std::to_string(kMaxEntries) +
                  " entries (a loop?); define it with EMMY_PLUGIN_LIBRARY(...)");
    if (e->abi_version != EMMY_SDK_ABI_VERSION || !e->name)
      throw Error(who + ": entry " + std::to_string(n) + " of the library (" + quoted(e->name) +
                  ") has ABI " + std::to_string(e->abi_version) +
                  " or no name; rebuild the "
                  "plugin against this emmy's SDK, with EMMY_PLUGIN_LIBRARY(...)");
    if (!seen.insert(e->name).second)
      throw Error(who + ": the library provides '" + std::string(e->name) +
                  "' twice; give each EMMY_PLUGIN_ENTRY its own emmy_add_plugin(... LIBRARY)");
    if (name == e->name) found = e;
  }
  return found;
}

}  // namespace

const EmmyPluginInfo& load_plugin_entry(const PluginRecord& record) {
  const std::string who = "plugin '" + record.name + "' (" + record.library_path + ")";
  if (!record.ok) throw Error(who + " was refused: " + record.reason);

  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.libraries.find(record.library_path);
  if (it == reg.libraries.end()) {
    boost::dll::shared_library library;
    try {
      // rtld_now: an unresolved symbol fails here, with its name, not later in a call.
      library.load(record.library_path, boost::dll::load_mode::rtld_now);
    } catch (const std::exception& e) {
      throw Error("cannot load " + who + ": " + load_failure(e.what()) +
                  "; check its dependencies with `ldd " + record.library_path + "`");
    }
    it = reg.libraries.emplace(record.library_path, std::move(library)).first;
  }
  boost::dll::shared_library& library = it->second;

  // Only the SDK's entry symbol is ever resolved, whatever the manifest says (discovery refuses
  // a manifest naming another): no other function of the library is called.
  constexpr const char* kEntry = EMMY_PLUGIN_ENTRY_SYMBOL;
  if (!library.has(kEntry))
    throw Error(who + " has no entry point '" + kEntry +
                "': define it with EMMY_PLUGIN(YourClass) and build with emmy_add_plugin()");
  auto& entry = library.get<const EmmyPluginInfo*()>(kEntry);
  const EmmyPluginInfo* first = entry();
  if (!first)
    throw Error(who + ": entry point '" + std::string(kEntry) + "' returned no plugin info");

  // The ABI version before anything else: with another ABI the rest of the struct may differ.
  if (first->abi_version != EMMY_SDK_ABI_VERSION)
    throw Error(who + " was built for SDK ABI " + std::to_string(first->abi_version) +
                ", this emmy speaks " + std::to_string(EMMY_SDK_ABI_VERSION) +
                ": rebuild the plugin against this emmy's SDK");
  const std::string stale =
      ": the manifest is stale or belongs to another library; rebuild the "
      "plugin so both come from the same emmy_add_plugin()";
  const EmmyPluginInfo* info = entry_named(first, record.name, who);
  if (!info) {
    const std::string provided = provided_names(first);
    throw Error(who + ": the library " +
                (first->next
                     ? "provides " + provided + ", not '" + record.name + "' its manifest names"
                     : "calls itself " + provided + ", its manifest '" + record.name + "'") +
                stale);
  }
  if (kind_name(info->kind) != record.kind) {
    std::string library_kind(kind_name(info->kind));
    if (library_kind.empty()) library_kind = "unknown (" + std::to_string(info->kind) + ")";
    throw Error(who + ": the library is a " + library_kind + " plugin, its manifest says " +
                record.kind + stale);
  }
  if (!info->version || record.version != info->version)
    throw Error(who + ": the library is version " + quoted(info->version) +
                ", its manifest says '" + record.version + "'" + stale);
  if (!info->create || !info->destroy)
    throw Error(who +
                ": the entry struct has no create or destroy function; define the entry with "
                "EMMY_PLUGIN(YourClass)");
  return *info;
}

}  // namespace emmy
