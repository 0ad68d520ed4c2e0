// JSON text that candidate-controlled strings cannot break. nlohmann::json::dump throws
// (type_error 316) on a string that is not valid UTF-8, and a candidate decides what its source
// lines, its compiler's messages and its printed output contain. Everything kforge writes (verdicts,
// run files, the databases, worker requests) goes through dump_json, which writes U+FFFD for each
// invalid byte instead.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace kforge {

// `j` with every string (keys too) made valid UTF-8 (core/text.hpp valid_utf8): for JSON that
// another program reads, or that is parsed again (a parser refuses invalid UTF-8).
inline nlohmann::json valid_utf8_json(const nlohmann::json& j) {
  if (j.is_string()) return valid_utf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : j) out.push_back(valid_utf8_json(e));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items()) out[valid_utf8(k)] = valid_utf8_json(v);
    return out;
  }
  return j;
}

inline std::string dump_json(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kforge
