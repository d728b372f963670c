#include "strata/base/numbers.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(ParseWholeNumber, TheWholeTextMustBeOneNumberThatFits) {
  EXPECT_EQ(parse_whole_number("42"), 42);
  EXPECT_EQ(parse_whole_number("-3"), -3);
  EXPECT_EQ(parse_whole_number("9223372036854775807"), INT64_MAX);
  for (const char* bad :
       {"", "x", "4x", "4 ", "1.5", "99999999999999999999", "-99999999999999999999"}) {
    EXPECT_EQ(parse_whole_number(bad), std::nullopt) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace strata
