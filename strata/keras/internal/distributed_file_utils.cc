#include "strata/keras/internal/distributed_file_utils.h"

#include <filesystem>
#include <string_view>
#include <system_error>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/distribute/strategy.h"

namespace strata::keras::internal {
namespace {

namespace fs = std::filesystem;

bool writes_to_temp(const distribute::Strategy& strategy) {
  return strategy.extended().in_multi_worker_mode() && !strategy.extended().should_checkpoint();
}

bool is_temp_dir(const std::string& dirpath, const distribute::Strategy& strategy) {
  return std::string_view(dirpath).ends_with(temp_dir_name(strategy));
}

// The temporary directory for `dirpath` (created).
std::string temp_dir(const std::string& dirpath, const distribute::Strategy& strategy) {
  std::string dir = is_temp_dir(dirpath, strategy)
                        ? dirpath
                        : (fs::path(dirpath) / temp_dir_name(strategy)).string();
  strata::make_dirs(dir);
  return dir;
}

}  // namespace

std::string temp_dir_name(const distribute::Strategy& strategy) {
  return str_cat("workertemp_", strategy.extended().task_id());
}

std::string write_dirpath(const std::string& dirpath, const distribute::Strategy& strategy) {
  if (!writes_to_temp(strategy)) return dirpath;
  return temp_dir(dirpath, strategy);
}

void remove_temp_dirpath(const std::string& dirpath, const distribute::Strategy& strategy) {
  if (!writes_to_temp(strategy)) return;
  const std::string dir = temp_dir(dirpath, strategy);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) {
    throw InternalError(
        str_cat("cannot remove the worker's temporary directory '", dir, "': ", ec.message()));
  }
}

std::string write_filepath(const std::string& filepath, const distribute::Strategy& strategy) {
  const fs::path path(filepath);
  return (fs::path(write_dirpath(path.parent_path().string(), strategy)) / path.filename())
      .string();
}

void remove_temp_dir_with_filepath(const std::string& filepath,
                                   const distribute::Strategy& strategy) {
  remove_temp_dirpath(fs::path(filepath).parent_path().string(), strategy);
}

}  // namespace strata::keras::internal
