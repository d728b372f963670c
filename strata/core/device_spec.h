#pragma once
// DeviceSpec: TensorFlow device names, parsed and printed.
//
//   auto d = strata::DeviceSpec::from_string("/job:worker/replica:0/task:1/device:CPU:0");
//   d.job;          // "worker"
//   d.task;         // 1
//   d.device_type;  // "CPU"
//   d.device_index; // 0
//   DeviceSpec::from_string("CPU:1").to_string();   // "/device:CPU:1"
//   DeviceSpec::from_string("/cpu:0");               // lower-case legacy form, type "CPU"
//
// Unset fields are std::nullopt / empty and print nothing, as in
// tf.DeviceSpec. Malformed names raise InvalidArgumentError quoting the name.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace strata {

struct DeviceSpec {
  std::string job;  // "" = unset
  std::optional<int> replica;
  std::optional<int> task;
  std::string device_type;  // "CPU", "GPU", "TPU"; "" = unset
  std::optional<int> device_index;

  static DeviceSpec from_string(std::string_view name);
  std::string to_string() const;
  // Fields set in `other` override this one's (tf.DeviceSpec.make_merged_spec).
  DeviceSpec merged_with(const DeviceSpec& other) const;
  // True when every field set in `pattern` equals this spec's field.
  bool matches(const DeviceSpec& pattern) const;
  bool operator==(const DeviceSpec&) const = default;
};

std::ostream& operator<<(std::ostream& os, const DeviceSpec& d);

}  // namespace strata
