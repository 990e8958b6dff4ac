// Number, SI-rate and duration formatting, and table alignment, of lib/ctl.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "lib/ctl/table.hh"
#include "lib/ctl/units.hh"

namespace ferry::ctl {
namespace {

TEST(FormatNumber, PrintsIntegersWithoutDecimals) {
  EXPECT_EQ(format_number(3), "3");
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(-0.0), "0");
  EXPECT_EQ(format_number(-7), "-7");
  EXPECT_EQ(format_number(1e12), "1000000000000");
  EXPECT_EQ(format_number(18446744073709551615.0), "18446744073709551616");
}

TEST(FormatNumber, KeepsAtMostThreeTrimmedDecimals) {
  EXPECT_EQ(format_number(2.5), "2.5");
  EXPECT_EQ(format_number(0.125), "0.125");
  EXPECT_EQ(format_number(3.14159), "3.142");
  EXPECT_EQ(format_number(-1.25), "-1.25");
  EXPECT_EQ(format_number(2.9996), "3");
}

TEST(FormatNumber, KeepsTinyValuesVisible) {
  EXPECT_EQ(format_number(0.000123), "0.000123");
  EXPECT_EQ(format_number(-0.0004567), "-0.000457");
}

TEST(FormatNumber, SpellsNonFiniteValuesLikePrometheus) {
  EXPECT_EQ(format_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(FormatRate, KeepsAboutThreeSignificantDigitsWithoutScaling) {
  EXPECT_EQ(format_rate(119998.221), "119998");
  EXPECT_EQ(format_rate(100), "100");
  EXPECT_EQ(format_rate(99.96), "100");
  EXPECT_EQ(format_rate(12.34), "12.3");
  EXPECT_EQ(format_rate(12.0), "12");
  EXPECT_EQ(format_rate(2.5), "2.5");
  EXPECT_EQ(format_rate(1.0 / 3), "0.33");
  EXPECT_EQ(format_rate(0), "0");
  EXPECT_EQ(format_rate(-0.001), "0");
}

TEST(FormatSi, ScalesByThousandsWithThreeSignificantDigits) {
  EXPECT_EQ(format_si(0, "pps"), "0 pps");
  EXPECT_EQ(format_si(5, "pps"), "5 pps");
  EXPECT_EQ(format_si(5.5, "pps"), "5.50 pps");
  EXPECT_EQ(format_si(999, "pps"), "999 pps");
  EXPECT_EQ(format_si(1234, "pps"), "1.23 kpps");
  EXPECT_EQ(format_si(12345, "pps"), "12.3 kpps");
  EXPECT_EQ(format_si(123456, "pps"), "123 kpps");
  EXPECT_EQ(format_si(98.4e6, "bps"), "98.4 Mbps");
  EXPECT_EQ(format_si(2.5e9, "bps"), "2.50 Gbps");
  EXPECT_EQ(format_si(-1500, "bps"), "-1.50 kbps");
}

TEST(FormatSi, RoundsUpIntoTheNextPrefixInsteadOfPrintingAThousand) {
  EXPECT_EQ(format_si(999.7, "pps"), "1.00 kpps");
  EXPECT_EQ(format_si(999999, "pps"), "1.00 Mpps");
}

TEST(FormatDuration, SpellsOutDaysHoursMinutesSeconds) {
  EXPECT_EQ(format_duration(93784), "1d 2h 3m 4s");
  EXPECT_EQ(format_duration(12.5), "12s");
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(61), "1m 1s");
  EXPECT_EQ(format_duration(3600), "1h 0m 0s");
  EXPECT_EQ(format_duration(86400), "1d 0h 0m 0s");
  EXPECT_EQ(format_duration(-1), "-");
  EXPECT_EQ(format_duration(std::nan("")), "-");
}

TEST(FormatAge, UsesMillisecondsThenSecondsThenDuration) {
  EXPECT_EQ(format_age_ms(12), "12ms");
  EXPECT_EQ(format_age_ms(999), "999ms");
  EXPECT_EQ(format_age_ms(1500), "1.5s");
  EXPECT_EQ(format_age_ms(75000), "1m 15s");
  EXPECT_EQ(format_age_ms(-3), "-");
}

TEST(Table, PadsColumnsToTheWidestCellAndRightAlignsNumbers) {
  Table table{"NAME", "VALUE", "NOTE"};
  table.add_row({"rx", "12", "ok"});
  table.add_row({"tx_packets", "3.5", "-"});
  table.add_row({"drops", "-", "x"});
  EXPECT_EQ(table.render(),
            "NAME        VALUE  NOTE\n"
            "rx             12  ok\n"
            "tx_packets    3.5  -\n"
            "drops           -  x\n");
}

TEST(Table, LeavesNoTrailingBlanksAndPadsShortRows) {
  Table table{"A", "LONG_HEADER"};
  table.add_row({"value"});
  EXPECT_EQ(table.render(),
            "A      LONG_HEADER\n"
            "value\n");
}

TEST(Table, ExplicitAlignmentOverridesTheGuess) {
  Table table(std::vector<Column>{{"ID", Align::left}, {"AGE", Align::right}});
  table.add_row({"7", "12ms"});
  table.add_row({"100", "1.5s"});
  EXPECT_EQ(table.render(),
            "ID    AGE\n"
            "7    12ms\n"
            "100  1.5s\n");
}

TEST(Table, MeasuresUtf8TextByCodePoints) {
  Table table{"LABEL", "N"};
  table.add_row({"caf\xc3\xa9", "1"});
  EXPECT_EQ(table.render(),
            "LABEL  N\n"
            "caf\xc3\xa9   1\n");
}

TEST(Table, RejectsRowsWiderThanTheTable) {
  Table table{"A"};
  EXPECT_THROW(table.add_row({"1", "2"}), std::invalid_argument);
}

TEST(Table, RecognisesNumbersAsFormatNumberWritesThem) {
  for (const char* yes :
       {"0", "12", "-3.5", "+1", "1e+20", "2.5E-3", ".5", "NaN", "+Inf", "-Inf"}) {
    EXPECT_TRUE(looks_numeric(yes)) << yes;
  }
  for (const char* no : {"", "-", "12ms", "1.2.3", "e5", "1e", "abc", "1 2", "3/4/5"}) {
    EXPECT_FALSE(looks_numeric(no)) << no;
  }
}

}  // namespace
}  // namespace ferry::ctl
