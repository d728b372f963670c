#pragma once
// The VariableImpl behind a ps variable handle (ps_variable.h), on the chief
// and on workers alike.

#include "strata/core/variable.h"
#include "strata/distribute/ps/internal/rpc.h"

namespace strata::distribute::ps::internal {

// A handle to the variable `info` describes; every RPC gets `timeout`.
Variable make_remote_variable(RemoteVariableInfo info, Seconds timeout);
// The description of a ps variable; nullptr for any other variable.
const RemoteVariableInfo* remote_variable_info(const Variable& v);

}  // namespace strata::distribute::ps::internal
