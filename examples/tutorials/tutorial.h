#pragma once
// Shared by the translated TensorFlow guides in this folder: the flags that
// shorten a guide for its test run, and a fresh temporary directory for the
// files a guide writes into its working directory.
//
//   auto flags = tutorial::parse_flags(argc, argv, {.epochs = 10});   // --epochs 2
//   --limit-examples 1280 int EPOCHS = flags.epochs; std::string dir =
//   tutorial::make_temp_dir("custom_training");
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

namespace tutorial {

struct Flags {
  int epochs = 1;               // the guide's EPOCHS; --epochs overrides it
  int64_t limit_examples = -1;  // --limit-examples N: keep the first N training examples
  int64_t steps = -1;           // --steps N: the guide's step counts (steps_per_epoch, ...)
  int64_t width = -1;  // --width N: the widest layers get N units, the others in proportion
};

// The defaults with the flags in argv applied; an unknown flag exits with 2.
inline Flags parse_flags(int argc, char** argv, Flags flags) {
  for (int i = 1; i < argc; i += 2) {
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (std::strcmp(argv[i], "--epochs") == 0) {
      flags.epochs = std::atoi(value);
    } else if (std::strcmp(argv[i], "--limit-examples") == 0) {
      flags.limit_examples = std::atoll(value);
    } else if (std::strcmp(argv[i], "--steps") == 0) {
      flags.steps = std::atoll(value);
    } else if (std::strcmp(argv[i], "--width") == 0) {
      flags.width = std::atoll(value);
    } else {
      std::cerr << argv[0] << ": unknown flag '" << argv[i]
                << "' (--epochs N, --limit-examples N, --steps N, --width N)\n";
      std::exit(2);
    }
  }
  return flags;
}

// A new empty directory under the system's temporary directory.
inline std::string make_temp_dir(const std::string& name) {
  std::string pattern = (std::filesystem::temp_directory_path() / (name + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::cerr << "cannot create a temporary directory from " << pattern << "\n";
    std::exit(2);
  }
  return pattern;
}

}  // namespace tutorial
