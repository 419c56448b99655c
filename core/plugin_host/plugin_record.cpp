#include "plugin_host/plugin_record.hpp"

#include "emmy/plugin.hpp"

namespace emmy {

uint32_t kind_code(std::string_view kind) {
  if (kind == "frontend") return EMMY_KIND_FRONTEND;
  if (kind == "pass") return EMMY_KIND_PASS;
  if (kind == "backend") return EMMY_KIND_BACKEND;
  if (kind == "prior") return EMMY_KIND_PRIOR;
  if (kind == "template") return EMMY_KIND_TEMPLATE;
  return 0;
}

std::string_view kind_name(uint32_t code) {
  switch (code) {
    case EMMY_KIND_FRONTEND:
      return "frontend";
    case EMMY_KIND_PASS:
      return "pass";
    case EMMY_KIND_BACKEND:
      return "backend";
    case EMMY_KIND_PRIOR:
      return "prior";
    case EMMY_KIND_TEMPLATE:
      return "template";
    default:
      return "";
  }
}

}  // namespace emmy
