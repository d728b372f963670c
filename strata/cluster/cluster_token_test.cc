#include "strata/cluster/cluster_token.h"

#include <stdlib.h>

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::cluster {
namespace {

using ::testing::HasSubstr;

TEST(ClusterToken, TokensCompareEqualOnlyWhenEveryByteAndTheLengthAgree) {
  EXPECT_TRUE(tokens_equal("", ""));
  EXPECT_TRUE(tokens_equal("abc123", "abc123"));
  EXPECT_FALSE(tokens_equal("abc123", "abc124"));
  EXPECT_FALSE(tokens_equal("abc123", "bbc123"));
  EXPECT_FALSE(tokens_equal("abc", "abc123"));
  EXPECT_FALSE(tokens_equal("abc123", "abc"));
  EXPECT_FALSE(tokens_equal("", "a"));
  // A shorter token padded with what the comparison pads with is still different.
  EXPECT_FALSE(tokens_equal(std::string("ab\0", 3), "ab"));
}

TEST(ClusterToken, GeneratedTokensAre64HexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    const std::string t = generate_cluster_token();
    EXPECT_EQ(t.size(), 64u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 16u);
}

TEST(ClusterToken, TheEnvironmentVariableIsValidated) {
  ::unsetenv(kClusterTokenEnv);
  EXPECT_EQ(cluster_token(), "");
  ::setenv(kClusterTokenEnv, "s3cret-Token_1", 1);
  EXPECT_EQ(cluster_token(), "s3cret-Token_1");
  ::setenv(kClusterTokenEnv, "has space", 1);
  try {
    cluster_token();
    ADD_FAILURE() << "a token with a space was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("STRATA_CLUSTER_TOKEN"));
    EXPECT_THAT(e.what(), HasSubstr("printable ASCII"));
  }
  ::setenv(kClusterTokenEnv, std::string(kMaxClusterTokenBytes + 1, 'a').c_str(), 1);
  EXPECT_THROW(cluster_token(), InvalidArgumentError);
  ::unsetenv(kClusterTokenEnv);
}

TEST(ClusterToken, BindAllInterfacesIsOnlyWhatTheOperatorAsked) {
  ::unsetenv("STRATA_BIND_ALL_INTERFACES");
  EXPECT_FALSE(bind_all_interfaces());
  ::setenv("STRATA_BIND_ALL_INTERFACES", "1", 1);
  EXPECT_TRUE(bind_all_interfaces());
  ::setenv("STRATA_BIND_ALL_INTERFACES", "yes please", 1);
  EXPECT_THROW(bind_all_interfaces(), InvalidArgumentError);
  ::unsetenv("STRATA_BIND_ALL_INTERFACES");
}

}  // namespace
}  // namespace strata::cluster
