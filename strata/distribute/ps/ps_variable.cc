#include "strata/distribute/ps/ps_variable.h"

#include "strata/base/errors.h"
#include "strata/distribute/ps/internal/remote_variable.h"

namespace strata::distribute::ps {

namespace {
thread_local CacheVariableReads* current_cache = nullptr;
}  // namespace

CacheVariableReads::CacheVariableReads() : outer_(current_cache) { current_cache = this; }
CacheVariableReads::~CacheVariableReads() { current_cache = outer_; }

// The read cache's private interface for RemoteVariableImpl.
class PsVariableAccess {
 public:
  static const Tensor* cached(const void* key) {
    if (!current_cache) return nullptr;
    auto it = current_cache->cache_.find(key);
    return it == current_cache->cache_.end() ? nullptr : &it->second;
  }
  static void store(const void* key, const Tensor& value) {
    if (current_cache) current_cache->cache_[key] = value;
  }
  static void count_remote_read() {
    if (current_cache) ++current_cache->remote_reads_;
  }
  static bool caching() { return current_cache != nullptr; }
};

namespace internal {
namespace {

class RemoteVariableImpl final : public VariableImpl {
 public:
  RemoteVariableImpl(RemoteVariableInfo info, Seconds timeout)
      : info_(std::move(info)), timeout_(timeout), client_(TaskClient::get(info_.target)) {}

  Tensor read() const override {
    if (const Tensor* cached = PsVariableAccess::cached(this)) return *cached;
    Tensor value = with_context([&] { return client_->read_variable(info_.id, timeout_); });
    PsVariableAccess::count_remote_read();
    PsVariableAccess::store(this, value);
    return value;
  }
  void assign(const Tensor& value) override { update(UpdateKind::ASSIGN, value); }
  void assign_add(const Tensor& delta) override { update(UpdateKind::ASSIGN_ADD, delta); }
  void assign_sub(const Tensor& delta) override { update(UpdateKind::ASSIGN_SUB, delta); }
  const std::string& name() const override { return info_.name; }
  const TensorShape& shape() const override { return info_.shape; }
  DType dtype() const override { return info_.dtype; }
  const std::string& device() const override { return info_.device; }
  bool trainable() const override { return info_.trainable; }
  VariableSynchronization synchronization() const override { return info_.synchronization; }
  VariableAggregation aggregation() const override { return info_.aggregation; }

  const RemoteVariableInfo& info() const noexcept { return info_; }

 private:
  void update(UpdateKind kind, const Tensor& value) {
    const bool caching = PsVariableAccess::caching();
    Tensor after = with_context(
        [&] { return client_->update_variable(info_.id, kind, value, caching, timeout_); });
    if (caching) PsVariableAccess::store(this, after);
  }
  // Names the variable in an RPC failure (the RPC's message names the ps).
  template <typename Fn>
  Tensor with_context(Fn&& fn) const {
    try {
      return fn();
    } catch (const Error& e) {
      throw_error(e.code(),
                  str_cat("ps variable '", info_.name, "' on ", info_.device, ": ", e.what()));
    }
  }

  RemoteVariableInfo info_;
  Seconds timeout_;
  std::shared_ptr<TaskClient> client_;
};

}  // namespace

Variable make_remote_variable(RemoteVariableInfo info, Seconds timeout) {
  return Variable(std::make_shared<RemoteVariableImpl>(std::move(info), timeout));
}

const RemoteVariableInfo* remote_variable_info(const Variable& v) {
  if (!v.defined()) return nullptr;
  const auto* impl = dynamic_cast<const RemoteVariableImpl*>(v.impl_ptr().get());
  return impl ? &impl->info() : nullptr;
}

}  // namespace internal

bool is_ps_variable(const Variable& v) { return internal::remote_variable_info(v) != nullptr; }

std::string ps_target_of(const Variable& v) {
  const internal::RemoteVariableInfo* info = internal::remote_variable_info(v);
  STRATA_CHECK_ARG(info != nullptr,
                   "ps_target_of: expected a ParameterServerStrategy variable, got ",
                   v.to_string());
  return info->target;
}

}  // namespace strata::distribute::ps
