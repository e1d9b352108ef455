// CompactOptional (the members of RegionSample) behaves as std::optional does for every
// operation the code uses; expected values are std::optional's own.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "stepprof/record.hpp"

namespace stepprof {
namespace {

TEST(CompactOptional, AgreesWithStdOptional) {
  for (const std::optional<double>& ref : {std::optional<double>(), std::optional<double>(0.0),
                                           std::optional<double>(-2.5), std::optional<double>(1e300)}) {
    const OptionalMs c = ref;
    EXPECT_EQ(c.has_value(), ref.has_value());
    EXPECT_EQ(static_cast<bool>(c), static_cast<bool>(ref));
    EXPECT_EQ(c.value_or(7), ref.value_or(7));
    EXPECT_EQ(static_cast<std::optional<double>>(c), ref);
    if (ref) {
      EXPECT_EQ(*c, *ref);
      EXPECT_EQ(c.value(), ref.value());
    } else {
      EXPECT_THROW((void)c.value(), std::bad_optional_access);
    }
  }
}

TEST(CompactOptional, AssignResetAndCompare) {
  OptionalCount calls;
  EXPECT_FALSE(calls);
  calls = 0;  // zero is a value, not "absent"
  EXPECT_TRUE(calls);
  EXPECT_EQ(*calls, 0);
  calls = std::nullopt;
  EXPECT_FALSE(calls);
  calls = std::optional<std::int64_t>(3);
  EXPECT_EQ(calls, OptionalCount(3));
  EXPECT_FALSE(calls == OptionalCount());
  calls.reset();
  EXPECT_EQ(calls, OptionalCount());
  EXPECT_TRUE(calls == std::nullopt);

  OptionalRegionId parent = kTopLevel;  // the top-level sentinel is a value
  EXPECT_TRUE(parent);
  EXPECT_EQ(*parent, kTopLevel);
}

TEST(CompactOptional, StoringNaNStoresAbsent) {
  OptionalMs t = 1.0;
  t = std::nan("");
  EXPECT_FALSE(t);  // the reader admits only finite times, so NaN never means a value
}

TEST(CompactOptional, RegionSampleStaysSmallAndDefaultsToAbsent) {
  static_assert(sizeof(RegionSample) == 32);
  const RegionSample s{};
  EXPECT_FALSE(s.parent);
  EXPECT_FALSE(s.device_ms);
  EXPECT_FALSE(s.host_ms);
  EXPECT_FALSE(s.calls);
}

}  // namespace
}  // namespace stepprof
