#include "strata/keras/callbacks/csv_logger.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/file.h"

namespace strata::keras::callbacks {
namespace {

// Python's str(numpy.float32(v)).
std::string float32_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), float(v));
  (void)ec;
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

CSVLoggerCallback::CSVLoggerCallback(std::string filename, std::string separator, bool append)
    : filename_(std::move(filename)), separator_(std::move(separator)), append_(append) {
  STRATA_CHECK_ARG(!filename_.empty(), "CSVLogger: filename is empty");
  STRATA_CHECK_ARG(!separator_.empty(), "CSVLogger: separator is empty");
}

std::shared_ptr<CSVLoggerCallback> CSVLogger(std::string filename, std::string separator,
                                             bool append) {
  return std::make_shared<CSVLoggerCallback>(std::move(filename), std::move(separator), append);
}

void CSVLoggerCallback::on_train_begin(Logs&) {
  // A run killed while writing the log left its temporary file: gone now.
  strata::remove_interrupted_writes(filename_);
  contents_.clear();
  keys_.clear();
  header_written_ = false;
  if (append_ && strata::file_exists(filename_)) {
    contents_ = strata::read_file(filename_);
    // Keras: no header when appending to a file that has content.
    header_written_ = !contents_.empty();
    if (!contents_.empty() && contents_.back() != '\n') contents_ += '\n';
  }
}

void CSVLoggerCallback::on_epoch_end(int epoch, Logs& logs) {
  if (keys_.empty()) {
    keys_ = logs.keys();
    std::sort(keys_.begin(), keys_.end());
  }
  if (!header_written_) {
    contents_ += "epoch";
    for (const std::string& k : keys_) contents_ += separator_ + k;
    contents_ += "\r\n";
    header_written_ = true;
  }
  contents_ += std::to_string(epoch);
  for (const std::string& k : keys_) {
    const std::optional<double> v = logs.get(k);
    contents_ += separator_ + (v ? float32_str(*v) : std::string("NA"));
  }
  contents_ += "\r\n";
  strata::write_file_atomically(filename_, contents_);
}

}  // namespace strata::keras::callbacks
