#include "strata/base/store.h"

#include <algorithm>
#include <charconv>

#include "strata/base/errors.h"

namespace strata {

Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

namespace internal {

int64_t add_to_counter(const std::string& who, const std::string& key, Bytes& value,
                       int64_t delta) {
  int64_t current = 0;
  if (!value.empty()) {
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), current);
    STRATA_CHECK_ARG(ec == std::errc() && ptr == value.data() + value.size(), who, ".add: key '",
                     key, "' holds ", value.size(),
                     " bytes that are not a counter (decimal integer)");
  }
  current += delta;
  const std::string text = std::to_string(current);
  value.assign(text.begin(), text.end());
  return current;
}

std::string format_duration(Milliseconds d) {
  if (d.count() % 1000 == 0) return str_cat(d.count() / 1000, "s");
  return str_cat(d.count(), "ms");
}

}  // namespace internal

InMemoryStore::InMemoryStore(InMemoryStoreOptions options) : options_(options) {}

void InMemoryStore::set(const std::string& key, const Bytes& value, Milliseconds /*timeout*/) {
  {
    MutexLock lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

Bytes InMemoryStore::get(const std::string& key, Milliseconds timeout) {
  wait({key}, timeout);
  MutexLock lock(mu_);
  return data_.at(key);
}

void InMemoryStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  auto missing = [&]() STRATA_REQUIRES(mu_) {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      if (!data_.contains(k)) out.push_back(k);
    }
    return out;
  };
  const bool done = cv_.wait_until(
      mu_, start + timeout, [&]() STRATA_REQUIRES(mu_) { return aborted_ || missing().empty(); });
  STRATA_CHECK(ABORTED, !aborted_, "InMemoryStore: aborted while waiting for keys ", keys);
  if (!done) {
    const auto waited =
        std::chrono::duration_cast<Milliseconds>(std::chrono::steady_clock::now() - start);
    throw DeadlineExceededError(str_cat("InMemoryStore: waited ", internal::format_duration(waited),
                                        " (timeout ", internal::format_duration(timeout),
                                        ") for keys ", keys, "; still missing: ", missing()));
  }
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta, Milliseconds /*timeout*/) {
  int64_t result = 0;
  {
    MutexLock lock(mu_);
    result = internal::add_to_counter("InMemoryStore", key, data_[key], delta);
  }
  cv_.notify_all();
  return result;
}

bool InMemoryStore::check(const std::vector<std::string>& keys, Milliseconds /*timeout*/) {
  MutexLock lock(mu_);
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& k) STRATA_REQUIRES(mu_) { return data_.contains(k); });
}

void InMemoryStore::abort() {
  {
    MutexLock lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

}  // namespace strata
