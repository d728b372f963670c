#pragma once
// Tensor <-> TensorProto and the other wire conversions of ps.proto. Included
// by .cc files only (it pulls in the generated protobuf header).

#include "strata/distribute/ps/internal/rpc.h"
#include "strata/distribute/ps/ps.pb.h"

namespace strata::distribute::ps::internal {

void to_proto(const Tensor& tensor, proto::TensorProto* out);
// DataLossError when the message is inconsistent (unknown dtype, element bytes
// not matching the dimensions).
Tensor from_proto(const proto::TensorProto& proto);

void to_proto(const RemoteVariableInfo& info, proto::VariableRef* out);
RemoteVariableInfo from_proto(const proto::VariableRef& ref);

}  // namespace strata::distribute::ps::internal
