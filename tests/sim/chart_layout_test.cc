// chart_layout_test.cc — the chart's arithmetic (chart_layout.h) and the replay's bins it
// regroups: bar widths 1-2-5 and whole bins (no "2.048 s" bar, no count split), equal lines
// fanned apart inside their panel, long text cut with an ellipsis.
#include "chart_layout.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ratelimit::sim {
namespace {

bool one_two_five(int64_t us) {
  while (us % 10 == 0) us /= 10;
  return us == 1 || us == 2 || us == 5;
}

TEST(ChartLayout, BarWidthsAreOneTwoFiveAndWholeBins) {
  EXPECT_EQ(nice_bar_width(1'000, 0), 1'000);
  EXPECT_EQ(nice_bar_width(1'000, 1'500), 2'000);
  EXPECT_EQ(nice_bar_width(1'000, 2'100), 5'000);
  EXPECT_EQ(nice_bar_width(2'000, 2'100), 10'000);  // 5 ms is not a whole number of 2 ms bins
  EXPECT_EQ(nice_bar_width(10'000, 14'000), 20'000);
  EXPECT_EQ(nice_bar_width(200'000, 1'500'000), 2'000'000);
  for (int64_t bin = 1'000; bin <= 2'000'000'000; bin *= 10) {
    for (int64_t b : {bin, 2 * bin}) {
      for (int64_t target : {int64_t{0}, b + 1, 3 * b, 7 * b, 123 * b}) {
        const int64_t w = nice_bar_width(b, target);
        EXPECT_TRUE(one_two_five(w)) << b << " " << target << " -> " << w;
        EXPECT_EQ(w % b, 0) << b << " " << target;
        EXPECT_GE(w, target);
        EXPECT_LE(w, std::max(b, target) * 5);
      }
    }
  }
}

TEST(ChartLayout, BinsGrowThroughOneTwoTenAndKeepEveryCount) {
  RateBins bins;
  bins.set_origin(0);
  std::vector<int64_t> widths{bins.width_us};
  int64_t admitted = 0, denied = 0;
  int64_t peak = 0;
  for (int64_t t = 0; t < 600'000'000; t += 7'919) {  // 10 minutes, an odd step
    const bool allowed = (t / 7'919) % 3 != 0;
    const int64_t count = (t / 7'919) % 17;
    bins.add(t, allowed, count);
    (allowed ? admitted : denied) += 1;
    if (allowed) peak = std::max(peak, count);
    if (bins.width_us != widths.back()) widths.push_back(bins.width_us);
  }
  EXPECT_EQ(widths, (std::vector<int64_t>{1'000, 2'000, 10'000, 20'000, 100'000, 200'000, 1'000'000}));
  EXPECT_LE(bins.admitted.size(), RateBins::kMaxBins);
  EXPECT_EQ(std::accumulate(bins.admitted.begin(), bins.admitted.end(), int64_t{0}), admitted);
  EXPECT_EQ(std::accumulate(bins.denied.begin(), bins.denied.end(), int64_t{0}), denied);
  EXPECT_EQ(*std::max_element(bins.key_peak.begin(), bins.key_peak.end()), peak);
}

TEST(ChartLayout, EqualLinesFanOutInsideThePanel) {
  // Five equal values: five positions 2 px apart around them, in index order.
  auto ys = fan_out({50, 50, 50, 50, 50}, 2, 0, 100);
  EXPECT_EQ(ys, (std::vector<double>{46, 48, 50, 52, 54}));
  // Distinct values stay where they are.
  ys = fan_out({10, 50, 90}, 2, 0, 100);
  EXPECT_EQ(ys, (std::vector<double>{10, 50, 90}));
  // At the panel's bottom (every algorithm admitted 0) the group moves up, not out.
  ys = fan_out({100, 100, 100}, 2, 0, 100);
  EXPECT_EQ(ys, (std::vector<double>{96, 98, 100}));
  // Two clusters, one of them near-equal.
  ys = fan_out({30, 70, 30.5, 70}, 2, 0, 100);
  EXPECT_DOUBLE_EQ(ys[0], 29.25);
  EXPECT_DOUBLE_EQ(ys[2], 31.25);
  EXPECT_DOUBLE_EQ(ys[1], 69);
  EXPECT_DOUBLE_EQ(ys[3], 71);
}

TEST(ChartLayout, LongTextIsCutWithAnEllipsis) {
  const std::string short_text = "pattern C";
  EXPECT_EQ(fit_text(short_text, 400, 16, true), short_text);
  const std::string log =
      "access log 'combined $msec ($remote_addr - $remote_user [$time_local] \"$request\" "
      "$status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $msec)' (time from $msec)";
  const std::string cut = fit_text(log, 300, 12, false);
  EXPECT_LT(cut.size(), log.size());
  EXPECT_EQ(cut.substr(cut.size() - 3), "\xE2\x80\xA6");
  EXPECT_EQ(log.rfind(cut.substr(0, cut.size() - 3), 0), 0U);
  EXPECT_LE(text_width(cut, 12, false), 300);
  // Never inside a UTF-8 sequence.
  const std::string cut2 = fit_text("ééééééééééééééééééééééééééééééé", 50, 12, false);
  EXPECT_EQ((cut2.size() - 3) % 2, 0U) << cut2;
  EXPECT_GT(text_width("sliding_window_counter", 14, true), 180);  // the widest lane title
}

}  // namespace
}  // namespace ratelimit::sim
