#include "strata/keras/callbacks/model_checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/logging.h"
#include "strata/base/str_cat.h"
#include "strata/keras/callbacks/monitor.h"
#include "strata/keras/model.h"

namespace strata::keras::callbacks {
namespace {

// Python's str() of a float32 log value (Keras's logs hold numpy float32):
// the shortest text that reads back as the same float.
std::string python_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), float(v));
  (void)ec;
  std::string s(buf, end);
  // Python writes integral floats with ".0" ("3.0", not "3").
  if (s.find_first_of(".einf") == std::string::npos) s += ".0";
  return s;
}

struct Spec {
  char fill = ' ';
  char align = 0;
  char sign = '-';
  bool zero = false;
  int width = 0;
  int precision = -1;
  char type = 0;
};

Spec parse_spec(const std::string& spec, const std::string& field) {
  Spec s;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    s.fill = spec[0];
    s.align = spec[1];
    i = 2;
  } else if (!spec.empty() && is_align(spec[0])) {
    s.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) s.sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    s.zero = true;
    ++i;
  }
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])))
    s.width = s.width * 10 + (spec[i++] - '0');
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    s.precision = 0;
    STRATA_CHECK_ARG(i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])),
                     "ModelCheckpoint: field '", field, "': format spec '", spec,
                     "' has no precision after '.'");
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
      s.precision = s.precision * 10 + (spec[i++] - '0');
    }
  }
  if (i < spec.size()) s.type = spec[i++];
  STRATA_CHECK_ARG(i == spec.size() &&
                       (s.type == 0 || std::string("dfFeEgGs%").find(s.type) != std::string::npos),
                   "ModelCheckpoint: field '", field, "': unsupported format spec '", spec, "'");
  return s;
}

std::string apply(const Spec& s, bool is_int, double value, const std::string& field) {
  std::string body;
  const bool negative = std::signbit(value) && !std::isnan(value);
  const double mag = std::abs(value);
  char buf[128];
  switch (s.type) {
    case 'd':
      STRATA_CHECK_ARG(
          is_int, "ModelCheckpoint: Unknown format code 'd' for object of type 'float' (field '",
          field, "')");
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(mag));
      body = buf;
      break;
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      const int p = s.precision < 0 ? 6 : s.precision;
      const char fmt[] = {'%', '.', '*', s.type, '\0'};
      std::snprintf(buf, sizeof(buf), fmt, p, mag);
      body = buf;
      break;
    }
    case '%': {
      std::snprintf(buf, sizeof(buf), "%.*f%%", s.precision < 0 ? 6 : s.precision, mag * 100);
      body = buf;
      break;
    }
    default:  // no type, or 's': str()
      if (is_int) {
        body = std::to_string(static_cast<long long>(mag));
      } else {
        body = python_str(mag);
        if (s.precision >= 0) {
          std::snprintf(buf, sizeof(buf), "%.*g", s.precision, mag);
          body = buf;
        }
      }
  }
  std::string sign = negative ? "-" : (s.sign == '+' ? "+" : (s.sign == ' ' ? " " : ""));
  const size_t len = sign.size() + body.size();
  if (size_t(s.width) <= len) return sign + body;
  const size_t pad = size_t(s.width) - len;
  // Python: numbers align right by default; "0" pads after the sign.
  if (s.zero && s.align == 0) return sign + std::string(pad, '0') + body;
  const char align = s.align != 0 ? s.align : '>';
  const std::string fill(pad, s.zero && s.align == 0 ? '0' : s.fill);
  if (align == '<') return sign + body + fill;
  if (align == '^')
    return std::string(pad / 2, s.fill) + sign + body + std::string(pad - pad / 2, s.fill);
  if (align == '=') return sign + fill + body;
  return fill + sign + body;
}

}  // namespace

std::string format_filepath(const std::string& pattern, int epoch, const Logs& logs) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c != '{') {
      STRATA_CHECK_ARG(c != '}', "ModelCheckpoint: single '}' in filepath '", pattern, "'");
      out += c;
      continue;
    }
    const size_t close = pattern.find('}', i);
    STRATA_CHECK_ARG(close != std::string::npos, "ModelCheckpoint: unclosed '{' in filepath '",
                     pattern, "'");
    const std::string field = pattern.substr(i + 1, close - i - 1);
    const size_t colon = field.find(':');
    const std::string name = field.substr(0, colon);
    const Spec spec = parse_spec(colon == std::string::npos ? "" : field.substr(colon + 1), name);
    if (name == "epoch") {
      out += apply(spec, /*is_int=*/true, double(epoch), name);
    } else {
      const std::optional<double> v = logs.get(name);
      STRATA_CHECK_ARG(
          v.has_value(), "ModelCheckpoint: failed to format filepath '", pattern,
          "': no log named '", name, "' (available: epoch", logs.empty() ? "" : ", ",
          [&] {
            std::string k;
            for (const auto& [key, value] : logs) k += (k.empty() ? "" : ", ") + key;
            return k;
          }(),
          ")");
      out += apply(spec, /*is_int=*/false, *v, name);
    }
    i = close;
  }
  return out;
}

SaveFreq::SaveFreq(const char* epoch) {
  STRATA_CHECK_ARG(std::string(epoch) == "epoch",
                   "save_freq: expected \"epoch\" or a number of batches, got \"", epoch, "\"");
}

SaveFreq::SaveFreq(int64_t batches) : batches_(batches) {
  STRATA_CHECK_ARG(batches > 0, "save_freq: expected a positive number of batches, got ", batches);
}

ModelCheckpointCallback::ModelCheckpointCallback(std::string filepath,
                                                 const ModelCheckpointOptions& options)
    : filepath_(std::move(filepath)),
      options_(options),
      maximize_(internal::monitor_maximizes(options.mode, options.monitor, "ModelCheckpoint")),
      best_(options.initial_value_threshold) {
  STRATA_CHECK_ARG(!filepath_.empty(), "ModelCheckpoint: filepath is empty");
}

std::shared_ptr<ModelCheckpointCallback> ModelCheckpoint(std::string filepath,
                                                         const ModelCheckpointOptions& options) {
  return std::make_shared<ModelCheckpointCallback>(std::move(filepath), options);
}

void ModelCheckpointCallback::on_train_begin(Logs&) { batches_seen_ = 0; }

void ModelCheckpointCallback::on_epoch_begin(int epoch, Logs&) { current_epoch_ = epoch; }

void ModelCheckpointCallback::on_train_batch_end(int64_t, Logs& logs) {
  if (options_.save_freq.per_epoch()) return;
  ++batches_seen_;
  if (batches_seen_ % options_.save_freq.batches() == 0) save(current_epoch_, logs);
}

void ModelCheckpointCallback::on_epoch_end(int epoch, Logs& logs) {
  if (options_.save_freq.per_epoch()) save(epoch, logs);
}

void ModelCheckpointCallback::save(int epoch, const Logs& logs) {
  const std::string path = format_filepath(filepath_, epoch + 1, logs);
  if (options_.save_best_only) {
    const std::optional<double> current = logs.get(options_.monitor);
    if (!current) {
      STRATA_LOG(WARNING, "Can save best model only with ", options_.monitor,
                 " available, skipping.");
      return;
    }
    const bool improved = !best_ || (maximize_ ? *current > *best_ : *current < *best_);
    if (!improved) {
      if (options_.verbose > 0) {
        std::cout << "\nEpoch " << (epoch + 1) << ": " << options_.monitor
                  << " did not improve from " << *best_ << "\n";
      }
      return;
    }
    if (options_.verbose > 0) {
      std::cout << "\nEpoch " << (epoch + 1) << ": " << options_.monitor << " improved from "
                << (best_ ? str_cat(*best_) : std::string(maximize_ ? "-inf" : "inf")) << " to "
                << *current << ", saving model to " << path << "\n";
    }
    best_ = current;
  } else if (options_.verbose > 0) {
    std::cout << "\nEpoch " << (epoch + 1) << ": saving model to " << path << "\n";
  }
  // Keras creates the checkpoint's folder (e.g. "./training_checkpoints/ckpt_{epoch}").
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) strata::make_dirs(folder.string());
  if (options_.save_weights_only) {
    model()->save_weights(path);
  } else {
    model()->save(path);
  }
}

}  // namespace strata::keras::callbacks
