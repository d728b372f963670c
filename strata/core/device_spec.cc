#include "strata/core/device_spec.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "strata/base/errors.h"

namespace strata {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    parts.push_back(
        s.substr(start, pos == std::string_view::npos ? s.size() - start : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

int parse_index(std::string_view text, std::string_view full, std::string_view field) {
  int value = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || text.empty()) {
    throw InvalidArgumentError(str_cat("DeviceSpec: expected a non-negative integer ", field,
                                       " in device name '", full, "', got '", text, "'"));
  }
  return value;
}

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

bool is_device_type(std::string_view s) {
  const std::string u = upper(s);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_';
  }) && std::isalpha(static_cast<unsigned char>(u[0]));
}

// Parses "TYPE:INDEX" or "TYPE:*" or "TYPE" into the spec.
void parse_type_index(std::string_view type, std::optional<std::string_view> index,
                      std::string_view full, DeviceSpec& spec) {
  if (!is_device_type(type)) {
    throw InvalidArgumentError(str_cat("DeviceSpec: expected a device type such as CPU in '", full,
                                       "', got '", type, "'"));
  }
  // TF accepts lower-case "cpu"/"gpu" legacy spellings and canonicalises them.
  spec.device_type =
      (type == "cpu" || type == "gpu" || type == "tpu") ? upper(type) : std::string(type);
  if (index && *index != "*") spec.device_index = parse_index(*index, full, "device index");
}

}  // namespace

DeviceSpec DeviceSpec::from_string(std::string_view name) {
  DeviceSpec spec;
  if (name.empty()) return spec;
  if (name.front() != '/') {
    // Short forms: "CPU:0", "CPU", "cpu:0".
    const auto parts = split(name, ':');
    if (parts.size() > 2) {
      throw InvalidArgumentError(str_cat("DeviceSpec: malformed device name '", name, "'"));
    }
    parse_type_index(parts[0], parts.size() == 2 ? std::optional(parts[1]) : std::nullopt, name,
                     spec);
    return spec;
  }
  const auto parts = split(name.substr(1), '/');
  for (std::string_view part : parts) {
    const auto kv = split(part, ':');
    if (kv.size() < 2 || kv[0].empty()) {
      throw InvalidArgumentError(
          str_cat("DeviceSpec: malformed component '", part, "' in device name '", name, "'"));
    }
    if (kv[0] == "job" && kv.size() == 2) {
      spec.job = std::string(kv[1]);
    } else if (kv[0] == "replica" && kv.size() == 2) {
      spec.replica = parse_index(kv[1], name, "replica");
    } else if (kv[0] == "task" && kv.size() == 2) {
      spec.task = parse_index(kv[1], name, "task");
    } else if (kv[0] == "device" && (kv.size() == 2 || kv.size() == 3)) {
      parse_type_index(kv[1], kv.size() == 3 ? std::optional(kv[2]) : std::nullopt, name, spec);
    } else if (kv.size() == 2 && is_device_type(kv[0])) {
      parse_type_index(kv[0], kv[1], name, spec);  // legacy "/cpu:0"
    } else {
      throw InvalidArgumentError(
          str_cat("DeviceSpec: unknown component '", part, "' in device name '", name, "'"));
    }
  }
  return spec;
}

std::string DeviceSpec::to_string() const {
  std::string s;
  if (!job.empty()) s += "/job:" + job;
  if (replica) s += "/replica:" + std::to_string(*replica);
  if (task) s += "/task:" + std::to_string(*task);
  if (!device_type.empty()) {
    s += "/device:" + device_type + ":" + (device_index ? std::to_string(*device_index) : "*");
  }
  return s;
}

DeviceSpec DeviceSpec::merged_with(const DeviceSpec& other) const {
  DeviceSpec m = *this;
  if (!other.job.empty()) m.job = other.job;
  if (other.replica) m.replica = other.replica;
  if (other.task) m.task = other.task;
  if (!other.device_type.empty()) m.device_type = other.device_type;
  if (other.device_index) m.device_index = other.device_index;
  return m;
}

bool DeviceSpec::matches(const DeviceSpec& p) const {
  return (p.job.empty() || p.job == job) && (!p.replica || p.replica == replica) &&
         (!p.task || p.task == task) && (p.device_type.empty() || p.device_type == device_type) &&
         (!p.device_index || p.device_index == device_index);
}

std::ostream& operator<<(std::ostream& os, const DeviceSpec& d) { return os << d.to_string(); }

}  // namespace strata
