// Test harnesses shared by every module's tests (see the headers in this folder).
