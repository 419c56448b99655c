# emmy_add_plugin(): the one function that makes an Emmy plugin (modelled on Halide's
# autoscheduler CMake). It builds a MODULE library with hidden visibility, so that only the
# entry point `emmy_plugin_info` (marked EMMY_EXPORT) is exported, and generates the plugin's
# FlatBuffers manifest with flatc next to it.
#
#   emmy_add_plugin(NAME <name> KIND <frontend|pass|backend|prior|template> [VERSION <x.y.z>]
#                   SOURCES <src>...
#                   [DESCRIPTION <text>]
#                   [FORKS <kind>:<fork-name>[:<knob>,<knob>...] ...]   kind = structural|in_place
#                   [KNOBS <knob-name>[=<v1>,<v2>,...] ...]
#                   [OPTIONS <name>=<default>[:<help>] ...]
#                   [AFTER <pass>...] [BEFORE <pass>...] [DEFAULT_PIPELINE]
#                   [EXTENDS <backend>]      KIND template only, and required there
#                   [LINK <target>...]
#                   [EXPORTS <symbol>...]    C functions exported beside the entry point (a cuda
#                                            template's library step: emmy/cuda_step.h)
#                   [LIBRARY <library>]      one plugin of emmy_add_plugin_library(NAME <library>)
#                   [OUTPUT_DIRECTORY <dir>])
#
# LIBRARY: the plugin's SOURCES join that library's module (compiled with this plugin's
# EMMY_PLUGIN_NAME / EMMY_PLUGIN_VERSION; they define EMMY_PLUGIN_ENTRY, not EMMY_PLUGIN), and its
# manifest names that library. Target emmy_plugin_<name> is then a custom target standing for the
# manifest and the library; OUTPUT_DIRECTORY and EXPORTS come from the library. Call it in the
# CMakeLists that called emmy_add_plugin_library.
#
# DEFAULT_PIPELINE (passes only): the pass is part of the default pipeline, whose order the host
# derives from every pass's AFTER/BEFORE (docs/PLUGINS.md). OPTIONS defaults are applied by the
# host before create(), so the plugin's code need not repeat them.
#
# Creates target emmy_plugin_<name>; library lib emmy_<name>.so and <name>.emmy-manifest land in
# OUTPUT_DIRECTORY (default: EMMY_PLUGIN_OUTPUT_DIRECTORY, else ${CMAKE_BINARY_DIR}/lib/emmy/plugins)
# and are installed to ${CMAKE_INSTALL_LIBDIR}/emmy/plugins when EMMY_PLUGIN_INSTALL is not OFF.
include_guard(GLOBAL)

if(NOT EMMY_FLATC)
  find_program(EMMY_FLATC NAMES flatc HINTS ${EMMY_FLATC_HINTS})
endif()
if(NOT EMMY_FLATC)
  message(FATAL_ERROR "emmy_add_plugin needs flatc (Debian: flatbuffers-compiler) to write manifests; "
                      "set EMMY_FLATC to its path")
endif()

function(_emmy_json_string out value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

function(_emmy_json_list out)
  set(items "")
  foreach(v IN LISTS ARGN)
    _emmy_json_string(q "${v}")
    list(APPEND items "${q}")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

# The MODULE library of a plugin (or of several: emmy_add_plugin_library), exporting only the entry
# point and EXPORTS.
function(_emmy_plugin_module target output_name output_dir)
  cmake_parse_arguments(M "" "" "SOURCES;LINK;EXPORTS" ${ARGN})
  add_library(${target} MODULE ${M_SOURCES})
  target_link_libraries(${target} PRIVATE EmmySDK::sdk ${M_LINK})
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${output_name}
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${output_dir}"
    BUILD_RPATH_USE_ORIGIN ON
    INSTALL_RPATH "$ORIGIN/../..")
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Anything a plugin forgets to hide stays out of the dynamic symbol table anyway: static
    # libraries' symbols, and the std:: template instances that libstdc++'s headers mark as
    # default-visible, which a version script listing only the entry point keeps local.
    set(exports "${CMAKE_CURRENT_BINARY_DIR}/emmy_manifest_${output_name}/exports.map")
    # EXPORTS: functions another process resolves by name (the cuda worker, a library step's);
    # they must be defined in the plugin's SOURCES (--exclude-libs hides a static library's).
    set(globals "emmy_plugin_info;")
    foreach(sym IN LISTS M_EXPORTS)
      if(NOT sym MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
        message(FATAL_ERROR "emmy plugin ${output_name}: EXPORTS '${sym}' is not a C identifier")
      endif()
      string(APPEND globals " ${sym};")
    endforeach()
    file(CONFIGURE OUTPUT "${exports}" CONTENT "{\n  global: ${globals}\n  local: *;\n};\n")
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--version-script=${exports}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${exports}")
  endif()
  if(NOT DEFINED EMMY_PLUGIN_INSTALL OR EMMY_PLUGIN_INSTALL)
    include(GNUInstallDirs)
    install(TARGETS ${target} LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}/emmy/plugins")
  endif()
endfunction()

# emmy_add_plugin_library(NAME <library> SOURCES <src>... [LINK <target>...] [EXPORTS <symbol>...]
#                         [OUTPUT_DIRECTORY <dir>])
# One shared library (lib emmy_<library>.so, target emmy_plugin_<library>) for several plugins, each
# added with emmy_add_plugin(... LIBRARY <library>). SOURCES: what they share, and the one source
# that lists their entries with EMMY_PLUGIN_LIBRARY (emmy/plugin.hpp). It has no manifest itself.
function(emmy_add_plugin_library)
  cmake_parse_arguments(L "" "NAME;OUTPUT_DIRECTORY" "SOURCES;LINK;EXPORTS" ${ARGN})
  if(NOT L_NAME MATCHES "^[a-z][a-z0-9_]*$" OR NOT L_SOURCES)
    message(FATAL_ERROR "emmy_add_plugin_library: NAME ([a-z][a-z0-9_]*) and SOURCES are required")
  endif()
  if(NOT L_OUTPUT_DIRECTORY)
    if(EMMY_PLUGIN_OUTPUT_DIRECTORY)
      set(L_OUTPUT_DIRECTORY "${EMMY_PLUGIN_OUTPUT_DIRECTORY}")
    else()
      set(L_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib/emmy/plugins")
    endif()
  endif()
  _emmy_plugin_module(emmy_plugin_${L_NAME} emmy_${L_NAME} "${L_OUTPUT_DIRECTORY}"
                      SOURCES ${L_SOURCES} LINK ${L_LINK} EXPORTS ${L_EXPORTS})
endfunction()

function(emmy_add_plugin)
  cmake_parse_arguments(P "DEFAULT_PIPELINE" "NAME;KIND;VERSION;DESCRIPTION;OUTPUT_DIRECTORY;EXTENDS;LIBRARY"
                        "SOURCES;FORKS;KNOBS;OPTIONS;AFTER;BEFORE;LINK;EXPORTS" ${ARGN})
  if(NOT P_NAME OR NOT P_KIND OR NOT P_SOURCES)
    message(FATAL_ERROR "emmy_add_plugin: NAME, KIND and SOURCES are required")
  endif()
  if(P_LIBRARY AND (P_EXPORTS OR P_OUTPUT_DIRECTORY))
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): EXPORTS and OUTPUT_DIRECTORY belong to emmy_add_plugin_library(NAME ${P_LIBRARY})")
  endif()
  if(P_UNPARSED_ARGUMENTS)
    # Typically a ';' inside DESCRIPTION, which CMake splits into a list: the rest would be lost.
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): unexpected arguments '${P_UNPARSED_ARGUMENTS}' (a ';' inside a quoted DESCRIPTION splits it: use ',' instead)")
  endif()
  if(NOT P_KIND MATCHES "^(frontend|pass|backend|prior|template)$")
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): KIND must be frontend, pass, backend, prior or template, not '${P_KIND}'")
  endif()
  if(P_KIND STREQUAL "template" AND NOT P_EXTENDS MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): a template plugin needs EXTENDS <backend> (e.g. EXTENDS cpu)")
  endif()
  if(P_EXTENDS AND NOT P_KIND STREQUAL "template")
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): EXTENDS is for KIND template only")
  endif()
  if(NOT P_NAME MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "emmy_add_plugin: NAME '${P_NAME}' must match [a-z][a-z0-9_]*")
  endif()
  if(P_DEFAULT_PIPELINE AND NOT P_KIND STREQUAL "pass")
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): DEFAULT_PIPELINE is for passes, not a ${P_KIND}")
  endif()
  if((P_AFTER OR P_BEFORE) AND NOT P_KIND STREQUAL "pass")
    message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): AFTER/BEFORE order passes; a ${P_KIND} has no place in the pipeline")
  endif()
  if(P_DEFAULT_PIPELINE)
    set(j_default "true")
  else()
    set(j_default "false")
  endif()
  if(NOT P_VERSION)
    set(P_VERSION "0.1.0")
  endif()
  if(NOT P_OUTPUT_DIRECTORY)
    if(EMMY_PLUGIN_OUTPUT_DIRECTORY)
      set(P_OUTPUT_DIRECTORY "${EMMY_PLUGIN_OUTPUT_DIRECTORY}")
    else()
      set(P_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib/emmy/plugins")
    endif()
  endif()

  set(target emmy_plugin_${P_NAME})
  if(P_LIBRARY)
    set(library_target emmy_plugin_${P_LIBRARY})
    if(NOT TARGET ${library_target})
      message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): LIBRARY ${P_LIBRARY} is not made yet: call emmy_add_plugin_library(NAME ${P_LIBRARY} ...) first")
    endif()
    get_target_property(P_OUTPUT_DIRECTORY ${library_target} LIBRARY_OUTPUT_DIRECTORY)
    set(sources "")
    foreach(src IN LISTS P_SOURCES)
      get_filename_component(src "${src}" ABSOLUTE)
      list(APPEND sources "${src}")
    endforeach()
    target_sources(${library_target} PRIVATE ${sources})
    target_link_libraries(${library_target} PRIVATE ${P_LINK})
    # Per source: each plugin's files see its own name, as a plugin of its own would.
    set_property(SOURCE ${sources} APPEND PROPERTY COMPILE_DEFINITIONS
                 EMMY_PLUGIN_NAME="${P_NAME}" EMMY_PLUGIN_VERSION="${P_VERSION}")
    set(library_file "libemmy_${P_LIBRARY}.so")
  else()
    _emmy_plugin_module(${target} emmy_${P_NAME} "${P_OUTPUT_DIRECTORY}"
                        SOURCES ${P_SOURCES} LINK ${P_LINK} EXPORTS ${P_EXPORTS})
    target_compile_definitions(${target} PRIVATE EMMY_PLUGIN_NAME="${P_NAME}"
                                                 EMMY_PLUGIN_VERSION="${P_VERSION}")
    set(library_file "libemmy_${P_NAME}.so")
  endif()

  # ---- the manifest: JSON from the arguments, then flatc -b against the SDK's schema ----
  _emmy_json_string(j_name "${P_NAME}")
  _emmy_json_string(j_kind "${P_KIND}")
  _emmy_json_string(j_version "${P_VERSION}")
  _emmy_json_string(j_desc "${P_DESCRIPTION}")
  _emmy_json_string(j_lib "${library_file}")
  set(forks "")
  foreach(f IN LISTS P_FORKS)
    string(REPLACE ":" ";" parts "${f}")
    list(LENGTH parts n)
    if(n LESS 2)
      message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): FORKS entry '${f}' is not <kind>:<name>[:knobs]")
    endif()
    list(GET parts 0 fkind)
    list(GET parts 1 fname)
    if(NOT fkind MATCHES "^(structural|in_place)$")
      message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): fork kind '${fkind}' must be structural or in_place")
    endif()
    set(fknobs "")
    if(n GREATER 2)
      list(GET parts 2 kn)
      string(REPLACE "," ";" fknobs "${kn}")
    endif()
    _emmy_json_string(qn "${fname}")
    _emmy_json_list(qk ${fknobs})
    list(APPEND forks "{\"name\": ${qn}, \"kind\": \"${fkind}\", \"knobs\": ${qk}}")
  endforeach()
  list(JOIN forks ", " forks)
  set(knobs "")
  foreach(k IN LISTS P_KNOBS)
    string(FIND "${k}" "=" eq)
    if(eq EQUAL -1)
      set(kname "${k}")
      set(kvals "")
    else()
      string(SUBSTRING "${k}" 0 ${eq} kname)
      math(EXPR after "${eq} + 1")
      string(SUBSTRING "${k}" ${after} -1 kvals)
    endif()
    _emmy_json_string(qn "${kname}")
    list(APPEND knobs "{\"name\": ${qn}, \"values\": [${kvals}]}")
  endforeach()
  list(JOIN knobs ", " knobs)
  set(opts "")
  foreach(o IN LISTS P_OPTIONS)
    if(NOT o MATCHES "^([^=]+)=([^:]*)(:(.*))?$")
      message(FATAL_ERROR "emmy_add_plugin(${P_NAME}): OPTIONS entry '${o}' is not <name>=<default>[:<help>]")
    endif()
    _emmy_json_string(on "${CMAKE_MATCH_1}")
    _emmy_json_string(od "${CMAKE_MATCH_2}")
    _emmy_json_string(oh "${CMAKE_MATCH_4}")
    list(APPEND opts "{\"name\": ${on}, \"default_value\": ${od}, \"help\": ${oh}}")
  endforeach()
  list(JOIN opts ", " opts)
  _emmy_json_list(j_after ${P_AFTER})
  _emmy_json_list(j_before ${P_BEFORE})
  _emmy_json_string(j_extends "${P_EXTENDS}")

  set(json_dir "${CMAKE_CURRENT_BINARY_DIR}/emmy_manifest_${P_NAME}")
  set(json "${json_dir}/${P_NAME}.json")
  file(MAKE_DIRECTORY "${json_dir}")
  file(WRITE "${json}.in" "{
  \"name\": ${j_name},
  \"kind\": ${j_kind},
  \"version\": ${j_version},
  \"abi_version\": ${EMMY_SDK_ABI_VERSION},
  \"entry_symbol\": \"emmy_plugin_info\",
  \"library\": ${j_lib},
  \"description\": ${j_desc},
  \"forks\": [${forks}],
  \"knobs\": [${knobs}],
  \"options\": [${opts}],
  \"after\": ${j_after},
  \"before\": ${j_before},
  \"extends\": ${j_extends},
  \"default_pipeline\": ${j_default}
}
")
  configure_file("${json}.in" "${json}" COPYONLY)
  set(manifest "${P_OUTPUT_DIRECTORY}/${P_NAME}.emmy-manifest")
  add_custom_command(
    OUTPUT "${manifest}"
    COMMAND "${EMMY_FLATC}" -b -o "${P_OUTPUT_DIRECTORY}" "${EMMY_MANIFEST_SCHEMA}" "${json}"
    DEPENDS "${json}" "${EMMY_MANIFEST_SCHEMA}"
    COMMENT "Writing manifest of Emmy plugin ${P_NAME}"
    VERBATIM)
  add_custom_target(${target}_manifest DEPENDS "${manifest}")
  if(P_LIBRARY)
    # Building the library writes every manifest naming it; emmy_plugin_<name> builds both.
    add_dependencies(${library_target} ${target}_manifest)
    add_custom_target(${target})
    add_dependencies(${target} ${library_target})
  else()
    add_dependencies(${target} ${target}_manifest)
  endif()

  if(NOT DEFINED EMMY_PLUGIN_INSTALL OR EMMY_PLUGIN_INSTALL)
    include(GNUInstallDirs)
    install(FILES "${manifest}" DESTINATION "${CMAKE_INSTALL_LIBDIR}/emmy/plugins")
  endif()
endfunction()
