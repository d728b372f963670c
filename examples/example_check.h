#pragma once
// A tiny result checker shared by the seed examples: each example prints what
// the seed page shows and exits non-zero if a value differs from the page's.
#include <iostream>

namespace example {

inline int& failures() {
  static int count = 0;
  return count;
}

inline void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "unexpected result: " << what << "\n";
    ++failures();
  }
}

inline int exit_code() { return failures() == 0 ? 0 : 1; }

}  // namespace example
