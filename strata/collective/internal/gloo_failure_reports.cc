#include "strata/collective/internal/gloo_failure_reports.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::collective::internal {
namespace {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

constexpr const char* kWho = "GlooCollectives";

Milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
  return std::max(left, Milliseconds(1));
}

}  // namespace

GlooFailureReports::GlooFailureReports(int rank, int size, std::shared_ptr<Store> store,
                                       GlooFailureReportsOptions options)
    : rank_(rank), size_(size), store_(std::move(store)), options_(std::move(options)) {}

std::string GlooFailureReports::me() const { return str_cat("rank ", rank_, " of ", size_); }

std::string GlooFailureReports::name(int r) const {
  return options_.rank_names.empty() ? str_cat("rank ", r)
                                     : str_cat("rank ", r, " (", options_.rank_names[r], ")");
}

std::string GlooFailureReports::names(const std::vector<int>& ranks) const {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", ");
    out += name(ranks[i]);
  }
  return out;
}

std::string GlooFailureReports::group() const {
  return str_cat("group ", options_.prefix, " of ", size_, " ranks");
}

Milliseconds GlooFailureReports::grace() const {
  return std::clamp(options_.timeout / 10, Milliseconds(100), Milliseconds(2000));
}

Milliseconds GlooFailureReports::store_timeout() const {
  return std::clamp(options_.timeout / 10, Milliseconds(1000), Milliseconds(5000));
}

void GlooFailureReports::leave_record(const std::string& key, const std::string& value) const {
  leave_record(key, value, Clock::now() + store_timeout());
}

void GlooFailureReports::leave_record(const std::string& key, const std::string& value,
                                      Clock::time_point until) const {
  try {
    store_->set(key + std::to_string(rank_), std::vector<char>(value.begin(), value.end()),
                remaining(until));
  } catch (const Error&) {
  }
}

std::optional<GlooFailureReports::PeerRecord> GlooFailureReports::peer_record(
    const std::vector<std::string>& keys) const {
  const Clock::time_point until = Clock::now() + grace();
  try {
    do {
      for (size_t k = 0; k < keys.size(); ++k) {
        for (int r = 0; r < size_; ++r) {
          if (r == rank_) continue;
          try {
            const std::vector<char> v = store_->get(keys[k] + std::to_string(r), Milliseconds(1));
            return PeerRecord{.key = k, .rank = r, .value = std::string(v.begin(), v.end())};
          } catch (const DeadlineExceededError&) {
          }
        }
      }
    } while (Clock::now() < until);
  } catch (const Error&) {
    // The store is gone too (its host died): the local message stands.
  }
  return std::nullopt;
}

std::string GlooFailureReports::unfinished_verdict(const std::string& what, uint64_t call,
                                                   const std::string& key) const {
  std::vector<int> waited, missing;
  try {
    store_->set(key + std::to_string(rank_), {'1'}, store_timeout());
    const Clock::time_point until = Clock::now() + grace();
    for (int r = 0; r < size_; ++r) {
      try {
        store_->wait({key + std::to_string(r)}, remaining(until));
        waited.push_back(r);
      } catch (const DeadlineExceededError&) {
        missing.push_back(r);
      }
    }
  } catch (const Error&) {
    return "";  // the store is gone too (its host died): the local message stands
  }
  if (missing.empty()) {
    return str_cat(kWho, ": collective #", call, " ", what, ": every rank (", names(waited),
                   ") timed out after ", options_.timeout.count(),
                   "ms in the data phase (reported by ", name(rank_), ")");
  }
  return str_cat(kWho, ": collective #", call, " ", what, ": ", names(missing),
                 " never finished it within ", options_.timeout.count(), "ms (", names(waited),
                 " timed out waiting; reported by ", name(rank_), ")", last_heard(missing));
}

namespace {
int64_t wall_clock_ms() {
  return std::chrono::duration_cast<Milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::string GlooFailureReports::progress_key(int r) const {
  return str_cat(options_.prefix, "/progress/", r);
}

void GlooFailureReports::publish_progress(const std::string& text) const {
  const std::string value = str_cat(wall_clock_ms(), " ", text);
  try {
    store_->set(progress_key(rank_), std::vector<char>(value.begin(), value.end()),
                store_timeout());
  } catch (const Error&) {
  }
}

std::string GlooFailureReports::last_heard(const std::vector<int>& ranks) const {
  return last_heard(ranks, Clock::now() + store_timeout());
}

std::string GlooFailureReports::last_heard(const std::vector<int>& ranks,
                                           Clock::time_point until) const {
  std::string out;
  try {
    for (int r : ranks) {
      if (!store_->check({progress_key(r)}, remaining(until))) continue;
      const std::vector<char> v = store_->get(progress_key(r), remaining(until));
      const std::string value(v.begin(), v.end());
      const size_t space = value.find(' ');
      if (space == std::string::npos) continue;
      int64_t stamp = 0;
      for (size_t i = 0; i < space; ++i) {
        if (value[i] < '0' || value[i] > '9') return out;  // not a progress record
        stamp = stamp * 10 + (value[i] - '0');
      }
      char ago[32];
      std::snprintf(ago, sizeof(ago), "%.1f", double(wall_clock_ms() - stamp) / 1000.0);
      out += str_cat("; ", name(r), " was last heard from ", ago,
                     " s before: ", value.substr(space + 1));
    }
  } catch (const Error&) {
    // The store is gone too (its host died or is stopped): what was read stands.
  }
  return out;
}

std::string with_host_order_ports(const std::string& gloo_message) {
  std::string out;
  out.reserve(gloo_message.size());
  size_t at = 0;
  for (size_t found = gloo_message.find("]:"); found != std::string::npos;
       found = gloo_message.find("]:", at)) {
    size_t end = found + 2;
    uint32_t port = 0;
    while (end < gloo_message.size() && end - found - 2 < 5 &&
           std::isdigit(static_cast<unsigned char>(gloo_message[end]))) {
      port = port * 10 + static_cast<uint32_t>(gloo_message[end] - '0');
      ++end;
    }
    const bool digits_end =
        end == gloo_message.size() || !std::isdigit(static_cast<unsigned char>(gloo_message[end]));
    out.append(gloo_message, at, found + 2 - at);
    if (end > found + 2 && digits_end && port <= 0xffff) {
      auto value = static_cast<uint16_t>(port);
      // The port's two bytes as they sit in memory were read as a host integer.
      if constexpr (std::endian::native == std::endian::little)
        value = static_cast<uint16_t>((value >> 8) | (value << 8));
      out += std::to_string(value);
    } else {
      out.append(gloo_message, found + 2, end - found - 2);
    }
    at = end;
  }
  out.append(gloo_message, at, std::string::npos);
  return out;
}

std::string GlooFailureReports::schedules_differ(uint64_t call, const std::string& description,
                                                 int peer, uint64_t their_call,
                                                 const std::string& their_description) const {
  return str_cat(kWho, ": collective schedules differ across workers: this worker, ", name(rank_),
                 ", issued collective #", call, " ", description, " but ", name(peer),
                 " issued collective #", their_call, " ", their_description);
}

std::string GlooFailureReports::not_entered(const std::string& collective,
                                            const std::string& missing,
                                            const std::string& heard) const {
  return str_cat(collective, ": ", missing, " never entered it within ", options_.timeout.count(),
                 "ms (reported by ", name(rank_), ")", heard);
}

std::string GlooFailureReports::gloo_failure(const std::string& what, uint64_t call, bool timed_out,
                                             const std::string& gloo_message) const {
  // With two ranks the peer is the other one; Gloo's message carries its address.
  const std::string peer = size_ == 2 ? str_cat(" (peer ", name(1 - rank_), ")") : std::string();
  return str_cat(kWho, ": collective #", call, " ", what, ": ", me(), ": ",
                 timed_out ? "timed out after " : "transport failure",
                 timed_out ? str_cat(options_.timeout.count(), "ms") : std::string(), peer, ": ",
                 with_host_order_ports(gloo_message));
}

}  // namespace strata::collective::internal
