// The plugin entry point (modelled on LLVM's llvmGetPassPluginInfo): one extern "C" function,
// `emmy_plugin_info`, returning a versioned struct. The host reads `abi_version` first and
// touches nothing else on a mismatch. Objects a plugin creates are destroyed by that plugin
// (`destroy`), and no exception crosses the boundary (`create` catches and reports).
//
// A plugin defines its entry with EMMY_PLUGIN(ClassName). emmy_add_plugin() passes the name and
// version from CMake as EMMY_PLUGIN_NAME / EMMY_PLUGIN_VERSION, the same values it writes into
// the manifest, so library and manifest agree by construction.
//
// One library may provide several plugins (the lowering passes share plugins/passes/lower/): the
// entry point returns the first, whose `next` leads to the others. Each plugin keeps its own
// manifest, naming the shared library; the host picks the entry with the manifest's name. Such a
// library is made with emmy_add_plugin_library() and one emmy_add_plugin(... LIBRARY <lib>) per
// plugin; each plugin's source defines EMMY_PLUGIN_ENTRY(ClassName, function) and one source of
// the library lists the functions in EMMY_PLUGIN_LIBRARY(function(), ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <type_traits>

#include "emmy/backend.hpp"
#include "emmy/frontend.hpp"
#include "emmy/kernel_template.hpp"
#include "emmy/pass.hpp"
#include "emmy/plugin_context.hpp"
#include "emmy/prior.hpp"

// Bumped on any change to the entry struct or to a plugin interface's layout or virtual table.
// 2: BackendCaps::devices and kernels_per_device, FailureKind::refused.
// 3: BackendCaps::alternatives (other implementations of a template's kernels, e.g. cuBLASLt).
// 4: BackendCaps::constraints (knob combinations a template refuses whatever the kernel).
// 5: MeasureRequest::end_to_end (a program timed as one, one cache flush per sample).
// 6: template plugins: EMMY_KIND_TEMPLATE, emmy::KernelTemplate, Backend::add_template.
// 7: EmmyPluginInfo::next (one library, several plugins: EMMY_PLUGIN_LIBRARY); create() takes
//    the plugin context (home, cache folder, environment: emmy/plugin_context.hpp);
//    ForkSite::templ (the template a lowering fork decides knobs of, no longer parsed from its
//    name).
#define EMMY_SDK_ABI_VERSION 7u
#define EMMY_PLUGIN_ENTRY_SYMBOL "emmy_plugin_info"

extern "C" {

enum EmmyPluginKind : uint32_t {
  EMMY_KIND_FRONTEND = 1,
  EMMY_KIND_PASS = 2,
  EMMY_KIND_BACKEND = 3,
  EMMY_KIND_PRIOR = 4,
  EMMY_KIND_TEMPLATE = 5,  // an emmy::KernelTemplate extending a backend (emmy/kernel_template.hpp)
};

struct EmmyPluginInfo {
  uint32_t abi_version;  // always first; EMMY_SDK_ABI_VERSION of the SDK the plugin was built with
  uint32_t kind;         // EmmyPluginKind
  const char* name;
  const char* version;
  // Creates the plugin's object: an emmy::Frontend*, Pass*, Backend*, Prior* or KernelTemplate*
  // (per `kind`), returned as void*. `options` holds "key=value" lines; `context` is what the host
  // tells every plugin (emmy/plugin_context.hpp; null: the empty context), valid during the call.
  // On failure returns nullptr and writes a NUL-terminated message into `error` (capacity
  // `error_size`).
  void* (*create)(const char* options, const EmmyPluginContext* context, char* error,
                  size_t error_size);
  // Destroys an object returned by `create`.
  void (*destroy)(void* object);
  // The library's next plugin, or nullptr (the last, or the only one). Every entry of the chain
  // has this same ABI version; names are distinct.
  const struct EmmyPluginInfo* next;
};

typedef const EmmyPluginInfo* (*EmmyPluginInfoFn)(void);
}

namespace emmy {

using PluginOptions = std::map<std::string, std::string>;

// "a=1\nb=two\n" -> {a:1, b:two}
inline PluginOptions parse_plugin_options(const char* text) {
  PluginOptions out;
  std::string s = text ? text : "";
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(pos, end - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

inline std::string format_plugin_options(const PluginOptions& options) {
  std::string s;
  for (const auto& [k, v] : options) s += k + "=" + v + "\n";
  return s;
}

namespace detail {

template <typename T>
constexpr uint32_t kind_of() {
  if constexpr (std::is_base_of_v<Frontend, T>)
    return EMMY_KIND_FRONTEND;
  else if constexpr (std::is_base_of_v<Pass, T>)
    return EMMY_KIND_PASS;
  else if constexpr (std::is_base_of_v<Backend, T>)
    return EMMY_KIND_BACKEND;
  else if constexpr (std::is_base_of_v<Prior, T>)
    return EMMY_KIND_PRIOR;
  else if constexpr (std::is_base_of_v<KernelTemplate, T>)
    return EMMY_KIND_TEMPLATE;
  else
    return 0;
}

template <typename T>
using interface_of = std::conditional_t<
    std::is_base_of_v<Frontend, T>, Frontend,
    std::conditional_t<std::is_base_of_v<Pass, T>, Pass,
                       std::conditional_t<std::is_base_of_v<Backend, T>, Backend,
                                          std::conditional_t<std::is_base_of_v<Prior, T>, Prior,
                                                             KernelTemplate>>>>;

inline void write_error(char* error, size_t size, const char* message) {
  if (!error || size == 0) return;
  std::strncpy(error, message, size - 1);
  error[size - 1] = '\0';
}

// The object handed across is the interface pointer (not T*), so the host can static_cast the
// void* back to the interface without knowing T.
// A class with a constructor (const PluginOptions&, const PluginContext&) gets the host's context;
// one with (const PluginOptions&) alone is created without it.
template <typename T>
void* create(const char* options, const EmmyPluginContext* context, char* error,
             size_t error_size) noexcept {
  try {
    using I = interface_of<T>;
    I* object = nullptr;
    if constexpr (std::is_constructible_v<T, const PluginOptions&, const PluginContext&>)
      object = new T(parse_plugin_options(options), PluginContext::from(context));
    else
      object = new T(parse_plugin_options(options));
    return static_cast<void*>(object);
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
  } catch (...) {
    write_error(error, error_size, "unknown exception in plugin constructor");
  }
  return nullptr;
}

template <typename T>
void destroy(void* object) noexcept {
  delete static_cast<interface_of<T>*>(object);
}

template <typename T>
constexpr EmmyPluginInfo info_of(const char* name, const char* version) {
  return {EMMY_SDK_ABI_VERSION, kind_of<T>(), name, version, &create<T>, &destroy<T>, nullptr};
}

// Links a library's entries into the chain the entry point returns (EMMY_PLUGIN_LIBRARY).
template <size_t N>
const EmmyPluginInfo* chain(EmmyPluginInfo (&entries)[N]) {
  for (size_t i = 0; i + 1 < N; ++i) entries[i].next = &entries[i + 1];
  return &entries[0];
}

}  // namespace detail
}  // namespace emmy

#if defined(_WIN32)
#define EMMY_EXPORT __declspec(dllexport)
#else
#define EMMY_EXPORT __attribute__((visibility("default")))
#endif

// A library of several plugins (see the top of this file): the entry point returns the entries
// that its arguments, calls of functions defined by EMMY_PLUGIN_ENTRY, make, chained in order.
#define EMMY_PLUGIN_LIBRARY(...)                                         \
  extern "C" EMMY_EXPORT const EmmyPluginInfo* emmy_plugin_info(void) {  \
    static EmmyPluginInfo entries[] = {__VA_ARGS__};                     \
    static const EmmyPluginInfo* first = ::emmy::detail::chain(entries); \
    return first;                                                        \
  }

// Defines the entry point for plugin class CLASS (constructible from emmy::PluginOptions, and
// optionally the emmy::PluginContext).
// The name and version come from emmy_add_plugin(); the host includes this header too (for
// EmmyPluginInfo) without them, so only a use of EMMY_PLUGIN without them is an error.
#if !defined(EMMY_PLUGIN_NAME) || !defined(EMMY_PLUGIN_VERSION)
#define EMMY_PLUGIN(CLASS)                                                       \
  static_assert(false,                                                           \
                "EMMY_PLUGIN_NAME / EMMY_PLUGIN_VERSION are not defined: build " \
                "plugins with emmy_add_plugin() from EmmySDK")
#define EMMY_PLUGIN_ENTRY(CLASS, FUNCTION) EMMY_PLUGIN(CLASS)
#else
// One plugin of a library of several: FUNCTION() returns its entry, for EMMY_PLUGIN_LIBRARY.
#define EMMY_PLUGIN_ENTRY(CLASS, FUNCTION)                                                   \
  static_assert(::emmy::detail::kind_of<CLASS>() != 0, #CLASS                                \
                " must derive from emmy::Frontend, Pass, Backend, Prior or KernelTemplate"); \
  EmmyPluginInfo FUNCTION() {                                                                \
    return ::emmy::detail::info_of<CLASS>(EMMY_PLUGIN_NAME, EMMY_PLUGIN_VERSION);            \
  }

#define EMMY_PLUGIN(CLASS)                                                                   \
  static_assert(::emmy::detail::kind_of<CLASS>() != 0, #CLASS                                \
                " must derive from emmy::Frontend, Pass, Backend, Prior or KernelTemplate"); \
  extern "C" EMMY_EXPORT const EmmyPluginInfo* emmy_plugin_info(void) {                      \
    static const EmmyPluginInfo info =                                                       \
        ::emmy::detail::info_of<CLASS>(EMMY_PLUGIN_NAME, EMMY_PLUGIN_VERSION);               \
    return &info;                                                                            \
  }
#endif
