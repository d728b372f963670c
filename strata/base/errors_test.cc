#include "strata/base/errors.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace strata {
namespace {

TEST(Errors, EachClassCarriesItsTensorFlowCode) {
  EXPECT_EQ(InvalidArgumentError("x").code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(OutOfRangeError("x").code(), ErrorCode::OUT_OF_RANGE);
  EXPECT_EQ(NotFoundError("x").code(), ErrorCode::NOT_FOUND);
  EXPECT_EQ(FailedPreconditionError("x").code(), ErrorCode::FAILED_PRECONDITION);
  EXPECT_EQ(UnavailableError("x").code(), ErrorCode::UNAVAILABLE);
  EXPECT_EQ(DeadlineExceededError("x").code(), ErrorCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(DataLossError("x").code(), ErrorCode::DATA_LOSS);
  EXPECT_EQ(UnimplementedError("x").code(), ErrorCode::UNIMPLEMENTED);
  EXPECT_EQ(AbortedError("x").code(), ErrorCode::ABORTED);
  EXPECT_EQ(CancelledError("x").code(), ErrorCode::CANCELLED);
  EXPECT_EQ(InternalError("x").code(), ErrorCode::INTERNAL);
  EXPECT_EQ(ResourceExhaustedError("x").code(), ErrorCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(static_cast<int>(ErrorCode::DATA_LOSS), 15);
  EXPECT_EQ(error_code_name(ErrorCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
}

TEST(Errors, ThrowErrorRaisesTheMatchingSubclass) {
  EXPECT_THROW(throw_error(ErrorCode::DATA_LOSS, "bad crc"), DataLossError);
  EXPECT_THROW(throw_error(ErrorCode::UNAVAILABLE, "gone"), UnavailableError);
  try {
    throw_error(ErrorCode::NOT_FOUND, "file /x missing");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NOT_FOUND);
    EXPECT_STREQ(e.what(), "file /x missing");
  }
}

TEST(Errors, CheckArgFormatsTheOffendingValues) {
  const std::vector<int64_t> shape{2, 3};
  try {
    STRATA_CHECK_ARG(shape.size() == 3, "Dense(dense_1): expected input of rank 3, got shape ",
                     shape);
    FAIL() << "no exception";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "Dense(dense_1): expected input of rank 3, got shape [2, 3]");
  }
  EXPECT_NO_THROW(STRATA_CHECK_ARG(true, "never"));
  EXPECT_THROW(STRATA_CHECK(UNAVAILABLE, false, "peer ", 3, " down"), UnavailableError);
}

TEST(Errors, InternalCheckNamesTheCondition) {
  try {
    STRATA_INTERNAL_CHECK(1 + 1 == 3, "math");
    FAIL();
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("1 + 1 == 3"), std::string::npos);
  }
}

TEST(Errors, ExceptionsKeepTheirTypeAcrossThreads) {
  std::exception_ptr carried;
  std::thread t([&] {
    try {
      throw DeadlineExceededError("all_reduce #4 timed out");
    } catch (...) {
      carried = std::current_exception();
    }
  });
  t.join();
  EXPECT_THROW(rethrow_if(carried), DeadlineExceededError);
  EXPECT_NO_THROW(rethrow_if(nullptr));
}

TEST(StrCat, PrintsBoolsBytesAndNestedVectors) {
  EXPECT_EQ(str_cat(true, " ", uint8_t{7}, " ", std::vector<std::vector<int>>{{1}, {2, 3}}),
            "true 7 [[1], [2, 3]]");
  EXPECT_EQ(str_join(std::vector<int>{1, 2, 3}, "x"), "1x2x3");
}

}  // namespace
}  // namespace strata
