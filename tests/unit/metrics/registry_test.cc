// The metrics registry: single-writer counters, snapshot merging and ordering, naming rules.
#include "lib/metrics/registry.hh"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <thread>

#include "lib/metrics/names.hh"

namespace ferry::metrics {
namespace {

TEST(Counter, AddsFromOneWriterAndReadsFromAnother) {
  Counter c;
  EXPECT_EQ(c.value(), 0u);
  std::thread writer([&] {
    for (int i = 0; i < 100000; ++i) c.add();
    c.add(5);
  });
  writer.join();
  EXPECT_EQ(c.value(), 100005u);
}

TEST(Gauge, SetsAndAddsNegative) {
  Gauge g;
  g.set(10);
  g.add(-15);
  EXPECT_EQ(g.value(), -5);
  g.set(7);
  EXPECT_EQ(g.value(), 7);
}

TEST(SnapshotBuilder, MergesFamiliesFromSeveralCollectorsAndSortsByName) {
  Registry registry;
  auto a = registry.add([](SnapshotBuilder& b) {
    b.counter("ferry_rx_packets_total", "Packets received.", {{"queue", "0"}}, 10);
    b.gauge("ferry_workers", "Workers running.", {}, 2);
  });
  auto c = registry.add([](SnapshotBuilder& b) {
    b.counter("ferry_rx_packets_total", "Packets received.", {{"queue", "1"}}, 20);
    b.declare("ferry_backends_up", "Healthy backends.", Type::gauge);
  });
  Snapshot s = registry.snapshot();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "ferry_backends_up");
  EXPECT_TRUE(s[0].samples.empty());
  EXPECT_EQ(s[1].name, "ferry_rx_packets_total");
  EXPECT_EQ(s[1].type, Type::counter);
  ASSERT_EQ(s[1].samples.size(), 2u);
  // Samples keep insertion order: collector order, then call order.
  EXPECT_EQ(s[1].samples[0].labels, (Labels{{"queue", "0"}}));
  EXPECT_EQ(s[1].samples[0].value, 10);
  EXPECT_EQ(s[1].samples[1].labels, (Labels{{"queue", "1"}}));
  EXPECT_EQ(s[1].samples[1].value, 20);
  EXPECT_EQ(s[2].name, "ferry_workers");
  EXPECT_EQ(s[2].samples.at(0).value, 2);
}

TEST(SnapshotBuilder, DeclareThenSampleIsOneFamily) {
  SnapshotBuilder b;
  b.declare("ferry_drops_total", "Drops.", Type::counter);
  b.counter("ferry_drops_total", "Drops.", {}, 3);
  Snapshot s = std::move(b).finish();
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].samples.size(), 1u);
  EXPECT_EQ(s[0].samples[0].value, 3);
}

TEST(SnapshotBuilder, TypeMismatchAbortsInDebugAndKeepsFirstInRelease) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // sanitizers run threads of their own
  auto build = [] {
    SnapshotBuilder b;
    b.gauge("ferry_thing", "First.", {}, 1);
    b.counter("ferry_thing", "First.", {}, 2);  // not a valid counter name either: never checked
    b.gauge("ferry_thing", "Other help.", {}, 3);
    return std::move(b).finish();
  };
  EXPECT_DEBUG_DEATH(
      {
        Snapshot s = build();
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].type, Type::gauge);
        EXPECT_EQ(s[0].help, "First.");
        ASSERT_EQ(s[0].samples.size(), 2u);  // the counter sample is dropped
        EXPECT_EQ(s[0].samples[1].value, 3);
      },
      "declared twice with different type or help");
}

TEST(SnapshotBuilder, HistogramKeepsBucketsSumAndCount) {
  SnapshotBuilder b;
  b.histogram("ferry_request_seconds", "Latency.", {{"service", "dns"}},
              HistogramValue{{{0.1, 2}, {1, 5}}, 2.5, 6});
  Snapshot s = std::move(b).finish();
  ASSERT_EQ(s.size(), 1u);
  const HistogramValue& h = s[0].samples.at(0).histogram;
  EXPECT_EQ(h.buckets.size(), 2u);
  EXPECT_EQ(h.buckets[1].second, 5u);
  EXPECT_EQ(h.sum, 2.5);
  EXPECT_EQ(h.count, 6u);
}

TEST(MetricNames, FollowPrometheusSyntax) {
  EXPECT_TRUE(is_valid_metric_name("ferry_rx:rate_total"));
  EXPECT_TRUE(is_valid_metric_name("_x"));
  EXPECT_TRUE(is_valid_metric_name(":x"));
  EXPECT_FALSE(is_valid_metric_name(""));
  EXPECT_FALSE(is_valid_metric_name("1x"));
  EXPECT_FALSE(is_valid_metric_name("ferry-rx"));
  EXPECT_FALSE(is_valid_metric_name("ferry rx"));
  EXPECT_TRUE(is_valid_label_name("queue"));
  EXPECT_TRUE(is_valid_label_name("_q1"));
  EXPECT_FALSE(is_valid_label_name("__name__"));
  EXPECT_FALSE(is_valid_label_name("a:b"));
  EXPECT_FALSE(is_valid_label_name("1a"));
  EXPECT_FALSE(is_valid_label_name(""));
}

// Returns the logic_error message of `f`, or "" if it did not throw one.
template <typename F>
std::string logic_error_of(F f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST(SnapshotBuilder, RejectsBadFamilyNamesWithLogicError) {
  SnapshotBuilder b;
  EXPECT_EQ(logic_error_of([&] { b.counter("ferry_rx_packets", "h", {}, 1); }),
            "counter 'ferry_rx_packets' must end in '_total'");
  EXPECT_EQ(logic_error_of([&] { b.gauge("rx_queue_depth", "h", {}, 1); }),
            "metric name 'rx_queue_depth' must start with 'ferry_'");
  EXPECT_EQ(logic_error_of([&] { b.gauge("ferry_rx-depth", "h", {}, 1); }),
            "metric name 'ferry_rx-depth' is not a valid Prometheus name");
  EXPECT_EQ(logic_error_of([&] { b.histogram("ferry_latency_seconds_total", "h", {}, {}); }),
            "histogram 'ferry_latency_seconds_total' must not end in '_total'");
  EXPECT_EQ(logic_error_of([&] { b.declare("ferry_x", "h", Type::counter); }),
            "counter 'ferry_x' must end in '_total'");
  EXPECT_TRUE(std::move(b).finish().empty());
}

TEST(SnapshotBuilder, RejectsBadLabelsWithLogicError) {
  SnapshotBuilder b;
  EXPECT_EQ(logic_error_of([&] {
              b.gauge("ferry_g", "h", {{"__name__", "x"}}, 1);
            }),
            "metric 'ferry_g': label name '__name__' is invalid");
  EXPECT_EQ(logic_error_of([&] {
              b.gauge("ferry_g", "h", {{"bad-label", "x"}}, 1);
            }),
            "metric 'ferry_g': label name 'bad-label' is invalid");
  EXPECT_EQ(logic_error_of([&] {
              b.gauge("ferry_g", "h", {{"q", "1"}, {"q", "2"}}, 1);
            }),
            "metric 'ferry_g': label 'q' given twice");
  EXPECT_EQ(logic_error_of([&] {
              b.histogram("ferry_h_seconds", "h", {{"le", "1"}}, {});
            }),
            "histogram 'ferry_h_seconds': label 'le' is reserved for bucket bounds");
  EXPECT_EQ(logic_error_of([&] {
              b.histogram("ferry_h_seconds", "h", {}, HistogramValue{{{1, 1}, {0.5, 1}}, 1, 1});
            }),
            "histogram 'ferry_h_seconds': bucket bounds must be strictly ascending");
  EXPECT_EQ(logic_error_of([&] {
              b.histogram("ferry_h_seconds", "h", {}, HistogramValue{{{INFINITY, 1}}, 1, 1});
            }),
            "histogram 'ferry_h_seconds': bucket bound inf is not finite");
  // Labels are fine for gauges named "le" too; only histograms reserve it.
  EXPECT_EQ(logic_error_of([&] { b.gauge("ferry_g", "h", {{"le", "x"}}, 1); }), "");
}

TEST(Registry, CollectorThrowingPropagatesToSnapshotCaller) {
  Registry registry;
  auto h = registry.add([](SnapshotBuilder& b) { b.counter("ferry_bad", "h", {}, 1); });
  EXPECT_THROW(registry.snapshot(), std::logic_error);
}

TEST(Registry, HandleRemovesItsCollectorOnResetAndDestruction) {
  Registry registry;
  int calls = 0;
  auto collect = [&calls](SnapshotBuilder&) { ++calls; };
  {
    auto h = registry.add(collect);
    registry.snapshot();
    EXPECT_EQ(calls, 1);
  }
  registry.snapshot();
  EXPECT_EQ(calls, 1);
  auto h = registry.add(collect);
  Registry::Handle moved = std::move(h);
  h.reset();  // moved-from: removes nothing
  registry.snapshot();
  EXPECT_EQ(calls, 2);
  moved.reset();
  registry.snapshot();
  EXPECT_EQ(calls, 2);
}

TEST(Registry, AddAndRemoveFromOtherThreadsWhileSnapshotting) {
  Registry registry;
  auto base =
      registry.add([](SnapshotBuilder& b) { b.gauge("ferry_base", "Always present.", {}, 1); });
  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int i = 0; i < 2000; ++i) {
      auto h = registry.add(
          [i](SnapshotBuilder& b) { b.gauge("ferry_churn", "Comes and goes.", {}, i); });
    }
    done = true;
  });
  int snapshots = 0;
  while (!done || snapshots == 0) {
    Snapshot s = registry.snapshot();
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s[0].name, "ferry_base");
    ++snapshots;
  }
  churn.join();
  EXPECT_EQ(registry.snapshot().size(), 1u);
}

}  // namespace
}  // namespace ferry::metrics
