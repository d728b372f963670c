#pragma once
// Private to the keras layer: where a worker writes a file under a
// multi-worker strategy (TF's keras/distribute/distributed_file_utils).
//
// Every worker runs the same saving code — reading the variables may need the
// cooperation of all workers (SyncOnRead variables sum across them) — but only
// the chief's copy should land at the user's path. A worker that should not
// checkpoint (strategy.extended().should_checkpoint() false, in multi-worker
// mode) writes into "<dir>/workertemp_<task_id>" instead and removes that
// directory once the file is written:
//
//   const std::string target = internal::write_filepath(path, strategy);
//   write_weights_file(target, contents);                // every worker
//   internal::remove_temp_dir_with_filepath(target, strategy);
//
// On every other strategy (and on the chief) the paths are returned unchanged
// and nothing is removed.
//
// Thread-safety: functions over the file system; two workers never share a
// temporary directory (task ids differ among non-chief workers).

#include <string>

namespace strata::distribute {
class Strategy;
}

namespace strata::keras::internal {

// "workertemp_<task_id>".
std::string temp_dir_name(const distribute::Strategy& strategy);

// The directory to write into instead of `dirpath`: `dirpath` itself on the
// chief or outside multi-worker mode, else `dirpath`/workertemp_<task_id>
// (or `dirpath` when it already ends in that name), created.
std::string write_dirpath(const std::string& dirpath, const distribute::Strategy& strategy);
// Removes (recursively) the temporary directory write_dirpath gave for
// `dirpath`; nothing on the chief or outside multi-worker mode.
void remove_temp_dirpath(const std::string& dirpath, const distribute::Strategy& strategy);

// The same for a file: write_dirpath of its directory joined with its name.
std::string write_filepath(const std::string& filepath, const distribute::Strategy& strategy);
void remove_temp_dir_with_filepath(const std::string& filepath,
                                   const distribute::Strategy& strategy);

}  // namespace strata::keras::internal
