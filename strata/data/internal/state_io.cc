#include "strata/data/internal/state_io.h"

#include <map>

#include "strata/base/errors.h"
#include "strata/base/logging.h"
#include "strata/base/str_cat.h"

namespace strata::data::internal {

void StateWriter::write_int(const std::string& key, int64_t value) { write(key, constant(value)); }

void StateWriter::write_elements(const std::string& key, const std::vector<Element>& elements) {
  write_int(key + "/n", static_cast<int64_t>(elements.size()));
  for (size_t i = 0; i < elements.size(); ++i) {
    const std::string at = str_cat(key, "/", i, "/");
    write_int(at + "n", static_cast<int64_t>(elements[i].size()));
    for (size_t c = 0; c < elements[i].size(); ++c) write(str_cat(at, c), elements[i][c]);
    if (elements[i].has_names()) {
      const std::vector<std::string>& names = elements[i].names();
      write(at + "names", constant(names, TensorShape{static_cast<int64_t>(names.size())}));
    }
  }
}

void StateWriter::save_input(const std::string& name, IteratorImpl& in,
                             std::vector<Element> pushed_back) {
  const std::string saved = prefix_;
  prefix_ += name + "/";
  try {
    in.save(*this, std::move(pushed_back));
  } catch (...) {
    prefix_ = saved;
    throw;
  }
  prefix_ = saved;
}

void StateWriter::external_state(const std::string& who, const std::string& why) {
  switch (policy_) {
    case ExternalStatePolicy::FAIL:
      throw FailedPreconditionError(str_cat(
          who, " is stateful: ", why,
          ", so the iterator's position cannot be saved (set "
          "Options::experimental_external_state_policy to ExternalStatePolicy::WARN or IGNORE "
          "to save the rest of the pipeline; ",
          who, " then starts over when restored)"));
    case ExternalStatePolicy::WARN:
      STRATA_LOG(WARNING, who, " is stateful: ", why,
                 "; its state is not saved and it starts over when the iterator is restored");
      return;
    case ExternalStatePolicy::IGNORE: return;
  }
}

int64_t StateReader::read_int(const std::string& key) const {
  const Tensor& t = read(key);
  if (t.dtype() != DType::int64 || t.num_elements() != 1)
    throw DataLossError(str_cat("iterator state: expected an int64 scalar at '", prefix_, key,
                                "', got ", t.shape().to_string(), " ", dtype_name(t.dtype())));
  return t.item<int64_t>();
}

std::vector<Element> StateReader::read_elements(const std::string& key) const {
  const int64_t n = read_int(key + "/n");
  std::vector<Element> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::string at = str_cat(key, "/", i, "/");
    const int64_t components = read_int(at + "n");
    Element e;
    for (int64_t c = 0; c < components; ++c) e.push_back(read(str_cat(at, c)));
    if (contains(at + "names")) {
      // A dict element: its components were written in name order.
      const Tensor& names = read(at + "names");
      if (names.dtype() != DType::string || names.rank() != 1 || names.num_elements() != components)
        throw DataLossError(str_cat("iterator state: expected ", components,
                                    " component names at '", prefix_, at, "names', got ",
                                    names.shape().to_string(), " ", dtype_name(names.dtype())));
      std::map<std::string, Tensor> named;
      for (int64_t c = 0; c < components; ++c)
        named.emplace(names.data<std::string>()[c], e[static_cast<size_t>(c)]);
      if (static_cast<int64_t>(named.size()) != components)
        throw DataLossError(
            str_cat("iterator state: repeated component names at '", prefix_, at, "names'"));
      e = Element(named);
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string StateReader::saved_kind() const {
  if (!contains("kind")) return "nothing";
  const Tensor& t = read("kind");
  if (t.dtype() != DType::string || t.num_elements() != 1)
    throw DataLossError(str_cat("iterator state: expected a transformation's name at '", prefix_,
                                "kind', got ", t.shape().to_string(), " ", dtype_name(t.dtype())));
  return t.item<std::string>();
}

void StateReader::check_kind(const char* kind) const {
  const std::string saved = saved_kind();
  STRATA_CHECK_ARG(saved == kind, "restoring an iterator: expected the state of ", kind, " at ",
                   where(), ", got the state of ", saved,
                   " (the checkpoint was saved from another input pipeline)");
}

void StateReader::restore_input(const std::string& name, IteratorImpl& in) {
  const std::string saved = prefix_;
  prefix_ += name + "/";
  try {
    in.restore(*this);
  } catch (...) {
    prefix_ = saved;
    throw;
  }
  prefix_ = saved;
}

}  // namespace strata::data::internal
