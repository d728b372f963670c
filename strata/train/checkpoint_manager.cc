#include "strata/train/checkpoint_manager.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/logging.h"
#include "strata/base/str_cat.h"
#include "strata/train/internal/object_graph_walk.h"
#include "strata/train/internal/worker_write.h"

namespace strata::train {
namespace fs = std::filesystem;

namespace internal {
namespace {
std::function<double()>& clock_override() {
  static std::function<double()> clock;
  return clock;
}
}  // namespace

void set_checkpoint_clock_for_testing(std::function<double()> clock) {
  clock_override() = std::move(clock);
}

double checkpoint_clock_now() {
  if (clock_override()) return clock_override()();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace internal

namespace {

// --- CheckpointState in protobuf text format ---------------------------------------

// protobuf's CEscape: quotes, backslash and control bytes escaped, other
// non-printable or non-ASCII bytes as three octal digits.
std::string escape_text(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += '\\';
          out += static_cast<char>('0' + ((c >> 6) & 7));
          out += static_cast<char>('0' + ((c >> 3) & 7));
          out += static_cast<char>('0' + (c & 7));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string format_double(double v) {
  char buf[64];
  // Fixed notation, shortest digits that read back exactly (what Python's
  // text_format prints for a time.time() value).
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  STRATA_INTERNAL_CHECK(r.ec == std::errc(), "cannot format timestamp ", v);
  return std::string(buf, r.ptr);
}

class TextParser {
 public:
  TextParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  CheckpointState parse() {
    CheckpointState state;
    bool has_last_preserved = false;
    skip_space();
    while (pos_ < text_.size()) {
      const std::string field = identifier();
      skip_space();
      expect(':');
      skip_space();
      if (field == "model_checkpoint_path") {
        state.model_checkpoint_path = string_value();
      } else if (field == "all_model_checkpoint_paths") {
        state.all_model_checkpoint_paths.push_back(string_value());
      } else if (field == "all_model_checkpoint_timestamps") {
        state.all_model_checkpoint_timestamps.push_back(number());
      } else if (field == "last_preserved_timestamp") {
        state.last_preserved_timestamp = number();
        has_last_preserved = true;
      } else {
        fail(str_cat("unknown field '", field, "'"));
      }
      skip_space();
    }
    (void)has_last_preserved;
    return state;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    throw DataLossError(str_cat("checkpoint state file '", path_, "' line ", line, ": ", what,
                                " (expected CheckpointState text)"));
  }
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  void expect(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) fail(str_cat("expected '", c, "'"));
    ++pos_;
  }
  std::string identifier() {
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '_')) {
      ++pos_;
    }
    if (start == pos_) fail("expected a field name");
    return text_.substr(start, pos_ - start);
  }
  // One or more adjacent quoted strings (concatenated, as protobuf does).
  std::string string_value() {
    std::string out;
    if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
      fail("expected a quoted string");
    }
    while (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'')) {
      const char quote = text_[pos_++];
      while (true) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string");
        char c = text_[pos_++];
        if (c == quote) break;
        if (c != '\\') {
          out += c;
          continue;
        }
        if (pos_ >= text_.size()) fail("unterminated escape");
        c = text_[pos_++];
        switch (c) {
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'a': out += '\a'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\\':
          case '\'':
          case '"':
          case '?': out += c; break;
          case 'x': {
            int v = 0, digits = 0;
            while (digits < 2 && pos_ < text_.size() &&
                   std::isxdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
              const char h = text_[pos_++];
              v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) != 0
                                ? h - '0'
                                : (std::tolower(h) - 'a' + 10));
              ++digits;
            }
            if (digits == 0) fail("bad \\x escape");
            out += static_cast<char>(v);
            break;
          }
          default:
            if (c >= '0' && c <= '7') {
              int v = c - '0', digits = 1;
              while (digits < 3 && pos_ < text_.size() && text_[pos_] >= '0' &&
                     text_[pos_] <= '7') {
                v = v * 8 + (text_[pos_++] - '0');
                ++digits;
              }
              if (v > 255) fail("octal escape out of range");
              out += static_cast<char>(v);
            } else {
              fail(str_cat("unknown escape '\\", c, "'"));
            }
        }
      }
      skip_space();
    }
    return out;
  }
  double number() {
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '.' ||
            text_[pos_] == '-' || text_[pos_] == '+')) {
      ++pos_;
    }
    std::string token = text_.substr(start, pos_ - start);
    if (!token.empty() && (token.back() == 'f' || token.back() == 'F') &&
        token.find_first_of("xX") == std::string::npos) {
      token.pop_back();  // protobuf accepts a float suffix
    }
    double v = 0;
    const char* first = token.data();
    if (!token.empty() && token[0] == '+') ++first;
    auto r = std::from_chars(first, token.data() + token.size(), v);
    if (token.empty() || r.ec != std::errc() || r.ptr != token.data() + token.size()) {
      fail(str_cat("expected a number, got '", token, "'"));
    }
    return v;
  }

  const std::string& path_;
  const std::string& text_;
  size_t pos_ = 0;
};

std::string join_path(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// os.path.relpath for paths inside `dir`; others are kept as given.
std::string relative_to(const std::string& path, const std::string& dir) {
  const fs::path abs_path = fs::absolute(path).lexically_normal();
  const fs::path abs_dir = fs::absolute(dir).lexically_normal();
  const fs::path rel = abs_path.lexically_relative(abs_dir);
  if (rel.empty() || *rel.begin() == "..") return path;
  return rel.string();
}

}  // namespace

std::optional<CheckpointState> get_checkpoint_state(const std::string& checkpoint_dir,
                                                    const std::string& latest_filename) {
  const std::string path = join_path(checkpoint_dir, latest_filename);
  if (!file_exists(path)) return std::nullopt;
  const std::string text = read_file(path);
  CheckpointState state = TextParser(path, text).parse();
  if (state.model_checkpoint_path.empty()) {
    throw DataLossError(
        str_cat("checkpoint state file '", path, "' names no model_checkpoint_path"));
  }
  auto absolute = [&](std::string& p) {
    if (!fs::path(p).is_absolute()) p = join_path(checkpoint_dir, p);
  };
  absolute(state.model_checkpoint_path);
  for (std::string& p : state.all_model_checkpoint_paths) absolute(p);
  return state;
}

std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& latest_filename) {
  const auto state = get_checkpoint_state(checkpoint_dir, latest_filename);
  if (!state) return std::nullopt;
  if (!file_exists(state->model_checkpoint_path)) {
    STRATA_LOG(WARNING, "latest_checkpoint: the state file of '", checkpoint_dir, "' names '",
               state->model_checkpoint_path, "', which does not exist");
    return std::nullopt;
  }
  return state->model_checkpoint_path;
}

void update_checkpoint_state(const std::string& save_dir, CheckpointState state,
                             const UpdateCheckpointStateOptions& options) {
  STRATA_CHECK_ARG(!state.model_checkpoint_path.empty(),
                   "update_checkpoint_state: empty model_checkpoint_path");
  if (options.save_relative_paths) {
    state.model_checkpoint_path = relative_to(state.model_checkpoint_path, save_dir);
    for (std::string& p : state.all_model_checkpoint_paths) p = relative_to(p, save_dir);
  }
  if (state.all_model_checkpoint_paths.empty() ||
      state.all_model_checkpoint_paths.back() != state.model_checkpoint_path) {
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  }
  STRATA_CHECK_ARG(
      state.all_model_checkpoint_timestamps.empty() ||
          state.all_model_checkpoint_timestamps.size() == state.all_model_checkpoint_paths.size(),
      "update_checkpoint_state: ", state.all_model_checkpoint_timestamps.size(), " timestamps for ",
      state.all_model_checkpoint_paths.size(), " checkpoints");
  const std::string state_path = join_path(save_dir, options.latest_filename);
  const auto resolved = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? p : join_path(save_dir, p);
  };
  STRATA_CHECK_ARG(fs::absolute(resolved(state.model_checkpoint_path)).lexically_normal() !=
                       fs::absolute(state_path).lexically_normal(),
                   "update_checkpoint_state: save path '", state.model_checkpoint_path,
                   "' conflicts with the path of the checkpoint state file");
  std::string text =
      str_cat("model_checkpoint_path: \"", escape_text(state.model_checkpoint_path), "\"\n");
  for (const std::string& p : state.all_model_checkpoint_paths) {
    text += str_cat("all_model_checkpoint_paths: \"", escape_text(p), "\"\n");
  }
  for (double t : state.all_model_checkpoint_timestamps) {
    text += str_cat("all_model_checkpoint_timestamps: ", format_double(t), "\n");
  }
  if (state.last_preserved_timestamp != 0.0) {
    text +=
        str_cat("last_preserved_timestamp: ", format_double(state.last_preserved_timestamp), "\n");
  }
  make_dirs(save_dir);
  write_file_atomically(state_path, text);
}

// --- CheckpointManager ---------------------------------------------------------------

CheckpointManager::CheckpointManager(Checkpoint checkpoint, std::string directory,
                                     CheckpointManagerOptions options)
    : checkpoint_(std::move(checkpoint)),
      directory_(std::move(directory)),
      options_(std::move(options)) {
  STRATA_CHECK_ARG(!directory_.empty(), "CheckpointManager: empty directory");
  STRATA_CHECK_ARG(!options_.max_to_keep || *options_.max_to_keep > 0,
                   "CheckpointManagerOptions.max_to_keep must be > 0 (or unset to keep every "
                   "checkpoint), got ",
                   options_.max_to_keep.value_or(0));
  STRATA_CHECK_ARG(!options_.checkpoint_interval || *options_.checkpoint_interval > 0,
                   "CheckpointManagerOptions.checkpoint_interval must be > 0, got ",
                   options_.checkpoint_interval.value_or(0));
  STRATA_CHECK_ARG(!options_.checkpoint_interval || options_.step_counter.defined(),
                   "CheckpointManagerOptions.step_counter must be set when checkpoint_interval is");
  STRATA_CHECK_ARG(!options_.checkpoint_name.empty(),
                   "CheckpointManagerOptions.checkpoint_name must not be empty");
  prefix_ = join_path(directory_, options_.checkpoint_name);
  const double now = internal::checkpoint_clock_now();
  const auto recovered = get_checkpoint_state(directory_);
  if (!recovered) {
    // A little in the past, so that a manager re-created at once does not race.
    last_preserved_timestamp_ = now - 1.0;
    return;
  }
  latest_ = recovered->model_checkpoint_path;
  last_preserved_timestamp_ = recovered->last_preserved_timestamp;
  if (now < last_preserved_timestamp_) {
    STRATA_LOG(WARNING, "CheckpointManager: the clock (", now,
               ") is before the last preserved checkpoint's time (", last_preserved_timestamp_,
               "); old checkpoints' times are clamped to now");
    last_preserved_timestamp_ = now;
  }
  std::vector<double> timestamps = recovered->all_model_checkpoint_timestamps;
  if (timestamps.empty()) {
    timestamps.assign(recovered->all_model_checkpoint_paths.size(), last_preserved_timestamp_);
  }
  const auto& paths = recovered->all_model_checkpoint_paths;
  for (size_t i = 0; i < paths.size() && i < timestamps.size(); ++i) {
    const double t = std::min(timestamps[i], now);
    if (t > last_preserved_timestamp_) maybe_delete_.emplace_back(paths[i], t);
  }
}

int64_t CheckpointManager::current_step() const {
  const Tensor v = options_.step_counter.value();
  STRATA_CHECK_ARG(
      v.num_elements() == 1 && (v.dtype() == DType::int64 || v.dtype() == DType::int32),
      "CheckpointManagerOptions.step_counter must be an integer scalar, got ",
      dtype_name(v.dtype()), " ", v.shape().to_string());
  return v.dtype() == DType::int64 ? v.item<int64_t>() : int64_t{v.item<int32_t>()};
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::vector<std::string> out;
  out.reserve(maybe_delete_.size());
  for (const auto& [path, time] : maybe_delete_) out.push_back(path);
  return out;
}

std::optional<std::string> CheckpointManager::save(std::optional<int64_t> checkpoint_number,
                                                   bool check_interval) {
  if (options_.checkpoint_interval) {
    const int64_t step = current_step();
    if (last_checkpoint_step_) {
      if (step == *last_checkpoint_step_) return std::nullopt;
      if (check_interval && step < *last_checkpoint_step_ + *options_.checkpoint_interval) {
        return std::nullopt;
      }
    }
    last_checkpoint_step_ = step;
  }
  const Variable& counter = checkpoint_.save_counter();
  counter.assign_add(constant(int64_t{1}));
  const int64_t number = checkpoint_number.value_or(counter.value().item<int64_t>());
  const std::string path = checkpoint_.write(str_cat(prefix_, "-", number));
  const double timestamp = internal::checkpoint_clock_now();
  // An overwritten checkpoint moves to the end of the queue.
  std::erase_if(maybe_delete_, [&](const auto& entry) { return entry.first == path; });
  maybe_delete_.emplace_back(path, timestamp);
  latest_ = path;
  // A worker other than the chief wrote to a temporary place; the chief
  // records the checkpoint and deletes the old ones (worker_write.h).
  if (internal::worker_temp_dir(internal::walk_object_graph(checkpoint_.as_trackable()),
                                directory_)) {
    return path;
  }
  // Record first (a crash while deleting still finds the new checkpoint),
  // then again without the deleted ones.
  record_state();
  sweep();
  record_state();
  return path;
}

void CheckpointManager::sweep() {
  if (!options_.max_to_keep) return;  // everything stays tracked
  while (maybe_delete_.size() > static_cast<size_t>(*options_.max_to_keep)) {
    auto [path, timestamp] = maybe_delete_.front();
    maybe_delete_.erase(maybe_delete_.begin());
    // Kept on disk but no longer tracked, so the state file stays small.
    if (options_.keep_checkpoint_every_n_hours &&
        timestamp - *options_.keep_checkpoint_every_n_hours * 3600.0 >= last_preserved_timestamp_) {
      last_preserved_timestamp_ = timestamp;
      continue;
    }
    std::error_code ec;
    fs::remove(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw_os_error("cannot remove old checkpoint", path, ec.value());
    }
  }
}

void CheckpointManager::record_state() {
  CheckpointState state;
  state.model_checkpoint_path = *latest_;
  for (const auto& [path, time] : maybe_delete_) {
    state.all_model_checkpoint_paths.push_back(path);
    state.all_model_checkpoint_timestamps.push_back(time);
  }
  state.last_preserved_timestamp = last_preserved_timestamp_;
  update_checkpoint_state(directory_, std::move(state), {.save_relative_paths = true});
}

std::optional<std::string> CheckpointManager::restore_or_initialize() {
  if (latest_) {
    checkpoint_.restore(latest_).expect_partial();
    if (options_.checkpoint_interval) last_checkpoint_step_ = current_step();
    return latest_;
  }
  if (options_.init_fn) options_.init_fn();
  return std::nullopt;
}

}  // namespace strata::train
