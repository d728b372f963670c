#include "tools/strata/bench_targets.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "strata/base/errors.h"

namespace strata::tools::bench {

// The text of tools/strata/bench_targets.json (generated at configure time).
extern const char* const kBenchTargetsJson;

namespace {

using nlohmann::json;

// Reads one row object; `where` names it in error messages.
class RowReader {
 public:
  RowReader(const json& row, std::string where) : row_(row), where_(std::move(where)) {}

  std::string str(const char* field, bool required) const {
    if (!row_.contains(field)) {
      STRATA_CHECK_ARG(!required, where_, ": expected a field \"", field, "\", got none");
      return "";
    }
    const json& v = row_.at(field);
    STRATA_CHECK_ARG(v.is_string(), where_, ": expected \"", field, "\" to be a string, got ",
                     v.dump());
    return v.get<std::string>();
  }

  std::vector<std::string> strings(const char* field) const {
    std::vector<std::string> out;
    if (!row_.contains(field)) return out;
    const json& v = row_.at(field);
    STRATA_CHECK_ARG(v.is_array(), where_, ": expected \"", field,
                     "\" to be a list of strings, got ", v.dump());
    for (const json& s : v) {
      STRATA_CHECK_ARG(s.is_string(), where_, ": expected \"", field,
                       "\" to be a list of strings, got ", v.dump());
      out.push_back(s.get<std::string>());
    }
    return out;
  }

  Kind kind() const {
    static const std::map<std::string, Kind> kinds = {{"seconds", Kind::seconds},
                                                      {"bytes_rate", Kind::bytes_rate},
                                                      {"bytes_rate_1024", Kind::bytes_rate_1024},
                                                      {"examples_rate", Kind::examples_rate},
                                                      {"ratio", Kind::ratio},
                                                      {"count", Kind::count},
                                                      {"gflops_rate", Kind::gflops_rate}};
    const std::string k = str("kind", true);
    auto it = kinds.find(k);
    STRATA_CHECK_ARG(it != kinds.end(), where_,
                     ": expected \"kind\" to be one of seconds, bytes_rate, bytes_rate_1024, "
                     "examples_rate, gflops_rate, ratio, count, got \"",
                     k, "\"");
    return it->second;
  }

  Target target() const {
    Target t;
    if (!row_.contains("target")) return t;
    const json& v = row_.at("target");
    STRATA_CHECK_ARG(v.is_object(), where_, ": expected \"target\" to be an object, got ",
                     v.dump());
    static const std::pair<const char*, Target::Of> bounds[] = {
        {"value_at_least", Target::value_at_least},
        {"value_at_most", Target::value_at_most},
        {"ratio_at_least", Target::ratio_at_least}};
    for (const auto& [name, of] : bounds) {
      if (!v.contains(name)) continue;
      STRATA_CHECK_ARG(t.of == Target::none, where_, ": expected one bound in \"target\", got ",
                       v.dump());
      STRATA_CHECK_ARG(v.at(name).is_number(), where_, ": expected \"target\".", name,
                       " to be a number, got ", v.at(name).dump());
      t.of = of;
      t.bound = v.at(name).get<double>();
    }
    STRATA_CHECK_ARG(t.of != Target::none, where_,
                     ": expected \"target\" to hold value_at_least, value_at_most or "
                     "ratio_at_least, got ",
                     v.dump());
    STRATA_CHECK_ARG(v.contains("text") && v.at("text").is_string(), where_,
                     ": expected \"target\".text to be a string, got ", v.dump());
    t.text = v.at("text").get<std::string>();
    return t;
  }

  RowSpec spec() const {
    RowSpec s{str("figure", true), Source{str("benchmark", true), str("field", true)}, kind()};
    s.peer = str("peer", false);
    const std::string script = str("peer_script", false);
    if (!script.empty()) {
      s.peer_source = Source{"", "", strings("peer_keys"), script};
      STRATA_CHECK_ARG(!s.peer_source.peer_keys.empty(), where_,
                       ": expected \"peer_keys\" beside \"peer_script\", got none");
    } else if (row_.contains("peer_benchmark")) {
      s.peer_source = Source{str("peer_benchmark", true), str("peer_field", true)};
    }
    STRATA_CHECK_ARG(s.peer.empty() == (script.empty() && !row_.contains("peer_benchmark")), where_,
                     ": expected \"peer\" together with \"peer_benchmark\" or \"peer_script\", "
                     "got ",
                     row_.dump());
    s.target = target();
    STRATA_CHECK_ARG(s.target.of != Target::ratio_at_least || !s.peer.empty(), where_,
                     ": expected a peer for a ratio_at_least target, got none");
    return s;
  }

 private:
  const json& row_;
  std::string where_;
};

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t i = 0; (i = s.find(from, i)) != std::string::npos; i += to.size())
    s.replace(i, from.size(), to);
}

// `s` with the placeholders of run key `key` filled in.
std::string expand(std::string s, const std::string& key) {
  const size_t slash = key.find('/');
  replace_all(s, "{args}", slash == std::string::npos ? "" : key.substr(slash + 1));
  replace_all(s, "{name}", key.starts_with("BM_") ? key.substr(3) : key);
  replace_all(s, "{key}", key);
  return s;
}

RowSpec expand(RowSpec s, const std::string& key) {
  s.figure = expand(s.figure, key);
  s.peer = expand(s.peer, key);
  for (Source* src : {&s.strata, &s.peer_source}) {
    src->benchmark = expand(src->benchmark, key);
    for (std::string& k : src->peer_keys) k = expand(k, key);
  }
  return s;
}

}  // namespace

bool higher_is_better(Kind k) { return k != Kind::seconds && k != Kind::count; }

std::vector<RowSpec> row_specs(const std::string& json_text, const std::string& name,
                               const std::map<std::string, const Run*>& runs) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  STRATA_CHECK_ARG(!doc.is_discarded(), name, ": expected JSON, got text that does not parse");
  STRATA_CHECK_ARG(doc.is_object() && doc.contains("rows") && doc.at("rows").is_array(), name,
                   ": expected an object with a list \"rows\", got ", doc.dump().substr(0, 80));
  std::vector<RowSpec> specs;
  const json& rows = doc.at("rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = name + " row " + std::to_string(i);
    const json& row = rows[i];
    STRATA_CHECK_ARG(row.is_object(), where, ": expected an object, got ", row.dump());
    if (!row.contains("for_each_benchmark")) {
      specs.push_back(RowReader(row, where).spec());
      continue;
    }
    const json& patterns = row.at("for_each_benchmark");
    STRATA_CHECK_ARG(patterns.is_array(), where,
                     ": expected \"for_each_benchmark\" to be a list, got ", patterns.dump());
    std::vector<std::pair<std::string, RowSpec>> by_prefix;
    for (size_t p = 0; p < patterns.size(); ++p) {
      const RowReader reader(patterns[p], where + " pattern " + std::to_string(p));
      by_prefix.emplace_back(reader.str("prefix", true), reader.spec());
    }
    // Run keys in order; each key gives the row of the first prefix it starts with.
    for (const auto& [key, run] : runs) {
      auto it = std::find_if(by_prefix.begin(), by_prefix.end(),
                             [&key = key](const auto& p) { return key.starts_with(p.first); });
      if (it != by_prefix.end()) specs.push_back(expand(it->second, key));
    }
  }
  std::erase_if(specs, [&](const RowSpec& s) { return runs.count(s.strata.benchmark) == 0; });
  return specs;
}

std::vector<RowSpec> row_specs(const std::map<std::string, const Run*>& runs) {
  return row_specs(kBenchTargetsJson, "bench_targets.json", runs);
}

}  // namespace strata::tools::bench
