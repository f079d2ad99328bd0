// timestamps_test.cc — the one rounding rule (seconds -> integer µs) and the timestamp forms
// traces may use.
#include "timestamps.h"

#include <gtest/gtest.h>

namespace ratelimit::sim {
namespace {

TEST(SecondsToUs, RoundsTheDoubleProductToNearestHalvesAway) {
  EXPECT_EQ(seconds_to_us(0.0), 0);
  EXPECT_EQ(seconds_to_us(2.9), 2'900'000);
  EXPECT_EQ(seconds_to_us(0.5e-6), 1);    // exactly half a µs: away from zero
  EXPECT_EQ(seconds_to_us(0.49e-6), 0);
  EXPECT_EQ(seconds_to_us(1.5e-6), 2);
  EXPECT_EQ(seconds_to_us(2.5e-6), 3);    // not banker's rounding
  // Pattern formulas whose doubles are not exact land on the intended µs.
  EXPECT_EQ(seconds_to_us(3.9 + 9 * 0.01), 3'990'000);
  EXPECT_EQ(seconds_to_us(4.0 + 3 * 0.01), 4'030'000);
  EXPECT_EQ(seconds_to_us(2 + 7 / 10.0), 2'700'000);
  EXPECT_EQ(seconds_to_us(5.0 + 1 * 0.02 / 30), 5'000'667);  // 5.000666...
  EXPECT_TRUE(seconds_in_range(0));
  EXPECT_FALSE(seconds_in_range(-1e-9));
  EXPECT_FALSE(seconds_in_range(1e300));
}

TEST(ParseDecimalSeconds, ReadsDigitsExactly) {
  EXPECT_EQ(*parse_decimal_seconds("12"), 12'000'000);
  EXPECT_EQ(*parse_decimal_seconds("12.5"), 12'500'000);
  EXPECT_EQ(*parse_decimal_seconds(".25"), 250'000);
  EXPECT_EQ(*parse_decimal_seconds("12."), 12'000'000);
  EXPECT_EQ(*parse_decimal_seconds("0.0000005"), 1);   // half a µs rounds up
  EXPECT_EQ(*parse_decimal_seconds("0.00000049999"), 0);
  EXPECT_EQ(*parse_decimal_seconds("1.9999995"), 2'000'000);  // carries into the seconds
  // An epoch time with more digits than a double holds is still exact.
  EXPECT_EQ(*parse_decimal_seconds("1714564800.123456"), 1'714'564'800'123'456);
}

TEST(ParseDecimalSeconds, RejectsWhatIsNotADecimal) {
  for (const char* bad : {"", ".", "-1", "+1", "1e3", "abc", "1.2.3", "1,5", " 1", "0x10",
                          "9999999999999"}) {
    auto r = parse_decimal_seconds(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("time"), std::string::npos) << bad;
    }
  }
}

TEST(ParseDecimalSeconds, MessagesShowBinaryInputEscapedAndShortened) {
  const std::string garbage = std::string("\x01\xff") + std::string(500, 'z');
  auto r = parse_decimal_seconds(garbage);
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("'\\x01\\xffzzz"), std::string::npos) << m;
  EXPECT_NE(m.find("...'"), std::string::npos) << m;
  EXPECT_LT(m.size(), 200U);
  EXPECT_EQ(printable("ok"), "ok");
  EXPECT_EQ(printable("abcdef", 3), "abc...");
}

TEST(ParseRfc3339, AcceptsOffsetsFractionsAndVariants) {
  EXPECT_EQ(*parse_rfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_rfc3339("2024-05-01T12:00:00Z"), 1'714'564'800'000'000);
  EXPECT_EQ(*parse_rfc3339("2024-05-01T14:00:00.25+02:00"), 1'714'564'800'250'000);
  EXPECT_EQ(*parse_rfc3339("2024-05-01t12:00:00.000001z"), 1'714'564'800'000'001);
  EXPECT_EQ(*parse_rfc3339("2024-05-01 07:30:00-04:30"), 1'714'564'800'000'000);
  EXPECT_EQ(*parse_rfc3339("2024-02-29T00:00:00.9999995Z"), 1'709'164'800'000'000 + 1'000'000);
  EXPECT_EQ(*parse_trace_timestamp("2024-05-01T12:00:00Z"), 1'714'564'800'000'000);
  EXPECT_EQ(*parse_trace_timestamp("3.5"), 3'500'000);
}

TEST(ParseRfc3339, RejectsInvalidDates) {
  for (const char* bad : {"2024-05-01T12:00:00", "2024-05-01", "2023-02-29T00:00:00Z",
                          "2024-13-01T00:00:00Z", "2024-04-31T00:00:00Z", "2024-05-01T24:00:00Z",
                          "2024-05-01T12:00:00.Z", "2024-05-01T12:00:00+0200",
                          "1969-12-31T23:59:59Z", "2024-05-01T12:00:00Zjunk"}) {
    EXPECT_FALSE(parse_rfc3339(bad).ok()) << bad;
  }
}

TEST(ParseClfTime, ReadsTheAccessLogForm) {
  EXPECT_EQ(*parse_clf_time("10/Oct/2000:13:55:36 -0700"), 971'211'336'000'000);
  EXPECT_EQ(*parse_clf_time("01/Jan/1970:00:00:00 +0000"), 0);
  for (const char* bad : {"10/Foo/2000:13:55:36 -0700", "10/Oct/2000:13:55:36", "10/Oct/2000 13:55:36 -0700",
                          "32/Oct/2000:13:55:36 -0700", "10/Oct/2000:13:55:36 -07:00", ""}) {
    EXPECT_FALSE(parse_clf_time(bad).ok()) << bad;
  }
}

TEST(Format, SecondsDurationsAndRfc3339) {
  EXPECT_EQ(format_seconds(5'100'000), "5.1");
  EXPECT_EQ(format_seconds(30'000'000), "30");
  EXPECT_EQ(format_seconds(1), "0.000001");
  EXPECT_EQ(format_seconds(0), "0");
  EXPECT_EQ(format_duration(Micros{1'000'000}), "1s");
  EXPECT_EQ(format_duration(Micros{2'000'000}), "2s");
  EXPECT_EQ(format_duration(Micros{1'500'000}), "1.5s");
  EXPECT_EQ(format_duration(Micros{500'000}), "500ms");
  EXPECT_EQ(format_duration(Micros{250}), "250us");
  EXPECT_EQ(format_rfc3339(1'714'564'800'250'000), "2024-05-01T12:00:00.25Z");
  EXPECT_EQ(format_rfc3339(0), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace ratelimit::sim
