#pragma once
// How each iterator of a pipeline writes and reads its part of an
// IteratorState (internal): a current path prefix, typed helpers, and the
// external-state policy that decides what a source without savable state does.
//
// Every iterator that has state writes "<prefix>kind" (its transformation's
// name) and its fields under <prefix>; its input goes under "<prefix>input/"
// ("<prefix>input_<i>/" for several inputs). Prefetch is transparent: its
// input's state sits at its own prefix, so a pipeline with and one without a
// prefetch (another buffer size, another replica count) share one layout.

#include <cstdint>
#include <string>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/data/iterator_state.h"

namespace strata::data::internal {

class StateWriter {
 public:
  StateWriter(IteratorState& out, ExternalStatePolicy policy) : out_(out), policy_(policy) {}

  void write(const std::string& key, Tensor value) { out_.set(prefix_ + key, std::move(value)); }
  void write_int(const std::string& key, int64_t value);
  // A list of elements under "<key>/n", "<key>/<i>/n", "<key>/<i>/<c>".
  void write_elements(const std::string& key, const std::vector<Element>& elements);
  void write_kind(const char* kind) { write("kind", constant(std::string(kind))); }

  // Saves `in` under "<prefix><name>/" (as if `pushed_back` were not yet returned).
  void save_input(const std::string& name, IteratorImpl& in, std::vector<Element> pushed_back = {});
  // Saves `in` at this prefix (transparent transformations).
  void save_here(IteratorImpl& in, std::vector<Element> pushed_back) {
    in.save(*this, std::move(pushed_back));
  }

  // A transformation whose state cannot be saved: FailedPreconditionError
  // under FAIL, a warning under WARN, nothing under IGNORE (then the
  // transformation restarts from its beginning when restored).
  void external_state(const std::string& who, const std::string& why);

 private:
  IteratorState& out_;
  ExternalStatePolicy policy_;
  std::string prefix_;
};

class StateReader {
 public:
  explicit StateReader(const IteratorState& in) : in_(in) {}

  bool contains(const std::string& key) const { return in_.contains(prefix_ + key); }
  const Tensor& read(const std::string& key) const { return in_.get(prefix_ + key); }
  int64_t read_int(const std::string& key) const;
  std::vector<Element> read_elements(const std::string& key) const;
  // The transformation whose state is at this prefix ("nothing" when none).
  std::string saved_kind() const;
  // InvalidArgumentError unless the saved kind at this prefix is `kind`.
  void check_kind(const char* kind) const;
  // The path of this prefix, for messages.
  std::string where() const { return prefix_.empty() ? std::string("the output") : prefix_; }

  void restore_input(const std::string& name, IteratorImpl& in);
  void restore_here(IteratorImpl& in) { in.restore(*this); }

 private:
  const IteratorState& in_;
  std::string prefix_;
};

}  // namespace strata::data::internal
