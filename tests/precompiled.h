#pragma once
// The precompiled header of the test programs (strata_test in
// cmake/StrataHelpers.cmake): GoogleTest and the standard and Strata headers
// most test files include, parsed once per build instead of once per test
// file. Every test file still includes what it uses; this only makes those
// includes cheap. A header belongs here when most test files include it and it
// changes rarely (a change recompiles every test file).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/tensor.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
