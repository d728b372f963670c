#pragma once
// Small parsers shared by the cluster layer (not installed).

#include <string_view>

namespace strata::cluster::internal {

// Python's int() on a string: surrounding blanks, an optional sign, decimal
// digits. Returns false for anything else or an out-of-range value.
bool parse_python_int(std::string_view s, int& out);

}  // namespace strata::cluster::internal
