// fx::data transforms over in-memory datasets: tensors / from_tensors, map, shuffle, batch, skip, shard, filter, concatenate,
// repeat, take, cache, zip, prefetch and cardinality, each against values computed by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fluxion/data.hpp>
#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>

#include "util.hpp"

using data_test::collect;

namespace {

/// 0, 1, ..., n-1 as a dataset of int32 scalars.
fx::data::dataset<fx::tensor<std::int32_t>> range(int n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return fx::data::tensors(fx::from_vector(v, {static_cast<fx::index_t>(n)}));
}

std::vector<std::int32_t> values(const fx::data::dataset<fx::tensor<std::int32_t>>& ds) {
  std::vector<std::int32_t> out;
  for (auto& t : ds) {
    REQUIRE(t.size() == 1);
    out.push_back(t.data()[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("tensors: slices along axis 0, copies, tuples of several tensors") {
  auto x = fx::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  auto y = fx::tensor<std::int32_t>{7, 8, 9};
  auto rows = fx::data::tensors(x);
  CHECK(rows.cardinality() == 3);
  auto got = collect(rows);
  REQUIRE(got.size() == 3);
  CHECK(got[1].shape() == fx::shape{2});
  CHECK(got[1].to_vector() == std::vector<float>{3, 4});
  int n = 0;
  for (auto [a, b] : fx::data::tensors(x, y)) {
    CHECK(a.to_vector() == std::vector<float>{float(2 * n + 1), float(2 * n + 2)});
    CHECK(b.shape() == fx::shape{});
    CHECK(b.data()[0] == 7 + n);
    ++n;
  }
  CHECK(n == 3);
  CHECK_THROWS_WITH_AS(fx::data::tensors(x, fx::tensor<std::int32_t>{1, 2}),
                       doctest::Contains("tensors: the tensors must have the same first extent"), fx::shape_error);
  auto once = collect(fx::data::from_tensors(x));
  REQUIRE(once.size() == 1);
  CHECK(once[0].shape() == fx::shape{3, 2});
  // Iterating twice starts again.
  CHECK(values(range(4)) == values(range(4)));
}

TEST_CASE("iterator: next() returns the elements, then nullopt for good") {
  auto it = range(2).open();
  auto a = it.next(), b = it.next(), c = it.next(), d = it.next();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->data()[0] == 0);
  CHECK(b->data()[0] == 1);
  CHECK(!c);
  CHECK(!d);
}

TEST_CASE("map: functions of the element, of a tuple's parts, and expressions materialized") {
  auto doubled = range(4).map([](const fx::tensor<std::int32_t>& t) { return t * 2; });
  static_assert(std::is_same_v<decltype(doubled)::element_type, fx::tensor<std::int32_t>>);
  CHECK(values(doubled) == std::vector<std::int32_t>{0, 2, 4, 6});
  auto x = fx::from_vector(std::vector<float>{1, 2, 3}, {3});
  auto summed = fx::data::tensors(x, x).map([](const fx::tensor<float>& a, const fx::tensor<float>& b) {
    return std::tuple{a + b, a * b};
  });
  std::vector<float> sums, products;
  for (auto [s, p] : summed) {
    sums.push_back(s.data()[0]);
    products.push_back(p.data()[0]);
  }
  CHECK(sums == std::vector<float>{2, 4, 6});
  CHECK(products == std::vector<float>{1, 4, 9});
}

TEST_CASE("shuffle: a deterministic permutation, reshuffled per pass, and a local buffer") {
  const auto ds = range(100).shuffle(10, 42);
  const auto first = values(ds);
  auto sorted = first;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == values(range(100)));  // a permutation
  CHECK(first != values(range(100)));   // and not the identity
  CHECK(values(range(100).shuffle(10, 42)) == first);  // the same seed, a fresh dataset: the same order
  CHECK(values(range(100).shuffle(10, 43)) != first);
  CHECK(values(ds) != first);  // the second pass of ds reshuffles...
  const auto fixed = range(100).shuffle(10, 42, /*reshuffle_each_iteration=*/false);
  CHECK(values(fixed) == first);  // ... and without reshuffling, every pass is the first
  CHECK(values(fixed) == first);
  // With a buffer of 10, output i comes from the first i + 10 inputs.
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i] < static_cast<std::int32_t>(i) + 10);
  // A buffer of 1 keeps the order; a buffer as large as the data draws uniformly: over 2000 seeds,
  // element 0 lands in each of 5 places about 400 times.
  CHECK(values(range(20).shuffle(1, 7)) == values(range(20)));
  std::vector<int> where(5, 0);
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    const auto v = values(range(5).shuffle(5, seed));
    where[static_cast<std::size_t>(std::find(v.begin(), v.end(), 0) - v.begin())]++;
  }
  for (int c : where) CHECK(std::abs(c - 400) < 80);  // about 4.5 standard deviations
  CHECK_THROWS_AS(range(3).shuffle(0, 1), fx::invalid_argument);
}

TEST_CASE("passes: open(n) starts pass n whatever came before, through every transform") {
  auto pass_values = [](const auto& ds, std::uint64_t n) {
    std::vector<std::int32_t> out;
    for (auto it = ds.begin(n); !(it == ds.end()); ++it) out.push_back(it->item());
    return out;
  };
  const auto ds = range(50).shuffle(50, 9).map([](const fx::tensor<std::int32_t>& t) { return t + 0; }).prefetch(3);
  const auto p0 = values(ds), p1 = values(ds), p2 = values(ds);  // passes 0, 1, 2 in turn
  CHECK(p0 != p1);
  CHECK(p1 != p2);
  const auto fresh = range(50).shuffle(50, 9).map([](const fx::tensor<std::int32_t>& t) { return t + 0; }).prefetch(3);
  CHECK(pass_values(fresh, 2) == p2);  // a fresh dataset object: pass 2 directly
  CHECK(pass_values(fresh, 0) == p0);
  CHECK(pass_values(fresh, 2) == p2);  // and again: open(n) does not advance anything
  CHECK(values(fresh) == p0);          // open() still counts from 0
  // repeat(2)'s pass 1 is its upstream's passes 2 and 3; an endless repeat's passes differ.
  const auto twice = range(50).shuffle(50, 9).repeat(2);
  const auto r1 = pass_values(twice, 1);
  CHECK(std::vector<std::int32_t>(r1.begin(), r1.begin() + 50) == p2);
  CHECK(std::vector<std::int32_t>(r1.begin() + 50, r1.end()) != p2);
  const auto endless = range(50).shuffle(50, 9).repeat().take(50);
  CHECK(pass_values(endless, 0) == p0);
  CHECK(pass_values(endless, 1) != p0);
  // zip opens both sides at the same pass.
  const auto zipped = range(50).shuffle(50, 9).zip(range(50).shuffle(50, 9));
  auto z = zipped.open(1);
  while (auto e = z.next()) CHECK(std::get<0>(*e).item() == std::get<1>(*e).item());
}

TEST_CASE("batch: stacks elements and tuples; a short last batch unless drop_remainder") {
  auto b = range(10).batch(4);
  CHECK(b.cardinality() == 3);
  auto got = collect(b);
  REQUIRE(got.size() == 3);
  CHECK(got[0].shape() == fx::shape{4});
  CHECK(got[0].to_vector() == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(got[2].to_vector() == std::vector<std::int32_t>{8, 9});
  CHECK(collect(range(10).batch(4, true)).size() == 2);
  CHECK(range(10).batch(4, true).cardinality() == 2);

  auto x = fx::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 2, 2});
  auto y = fx::tensor<std::int32_t>{5, 6, 7};
  auto batches = collect(fx::data::tensors(x, y).batch(2));
  REQUIRE(batches.size() == 2);
  auto& [bx, by] = batches[0];
  CHECK(bx.shape() == fx::shape{2, 2, 2});
  CHECK(bx.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(by.shape() == fx::shape{2});
  CHECK(by.to_vector() == std::vector<std::int32_t>{5, 6});
  CHECK(std::get<0>(batches[1]).shape() == fx::shape{1, 2, 2});

  auto ragged = fx::data::tensors(fx::tensor<float>{1, 2, 3}).map([](const fx::tensor<float>& t) {
    return t.data()[0] == 2 ? fx::tensor<float>{1, 2} : fx::tensor<float>{1};
  });
  CHECK_THROWS_WITH_AS(collect(ragged.batch(3)), doctest::Contains("batch: element 1 of the batch has shape (2,)"),
                       fx::shape_error);
}

TEST_CASE("repeat and take: counts and contents") {
  CHECK(values(range(3).repeat(2)) == std::vector<std::int32_t>{0, 1, 2, 0, 1, 2});
  CHECK(range(3).repeat(2).cardinality() == 6);
  CHECK(range(3).repeat().cardinality() == fx::data::infinite_cardinality);
  CHECK(values(range(3).repeat().take(7)) == std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 0});
  CHECK(range(3).repeat().take(7).cardinality() == 7);
  CHECK(values(range(3).repeat(0)).empty());
  CHECK(values(range(0).repeat()).empty());  // no endless loop over nothing
  CHECK(values(range(5).take(2)) == std::vector<std::int32_t>{0, 1});
  CHECK(values(range(5).take(0)).empty());
  CHECK(values(range(5).take(9)).size() == 5);
  CHECK(values(range(5).take(-1)).size() == 5);
  // Each repetition of a shuffled dataset is a new permutation, the whole sequence deterministic.
  const auto twice = values(range(10).shuffle(10, 3).repeat(2));
  CHECK(twice == values(range(10).shuffle(10, 3).repeat(2)));
  CHECK(std::vector<std::int32_t>(twice.begin(), twice.begin() + 10) !=
        std::vector<std::int32_t>(twice.begin() + 10, twice.end()));
}

TEST_CASE("cache: the upstream is read once, by the first full pass, and replayed") {
  // A source that counts its reads, and whose order depends on the pass (as a shuffle's does).
  auto reads = std::make_shared<std::atomic<int>>(0);
  auto opened = std::make_shared<std::vector<std::uint64_t>>();
  fx::data::dataset<fx::tensor<std::int32_t>> counted(
      [reads, opened](std::uint64_t pass) -> fx::data::dataset<fx::tensor<std::int32_t>>::next_fn {
        opened->push_back(pass);
        return [reads, pass, i = 0]() mutable -> std::optional<fx::tensor<std::int32_t>> {
          if (i == 4) return std::nullopt;
          ++*reads;
          return fx::tensor<std::int32_t>(static_cast<std::int32_t>(10 * pass + static_cast<std::uint64_t>(i++)));
        };
      },
      4);
  auto cached = counted.cache();
  CHECK(cached.cardinality() == 4);
  // A pass that stops early keeps nothing.
  CHECK(values(cached.take(2)) == std::vector<std::int32_t>{0, 1});
  CHECK(*reads == 2);
  {
    auto it = cached.open(5);  // a pass abandoned before its end
    CHECK(it.next()->data()[0] == 0);
  }
  CHECK(*reads == 3);
  // The first full pass reads the upstream's pass 0, whatever its own number; later passes, and
  // copies of the dataset, replay it without reading.
  CHECK(values(cached.shuffle(1, 0)) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(*reads == 7);
  const auto copy = cached;
  for (std::uint64_t pass : {0u, 3u, 7u}) {
    std::vector<std::int32_t> got;
    auto it = copy.open(pass);
    while (auto e = it.next()) got.push_back(e->data()[0]);
    CHECK(got == std::vector<std::int32_t>{0, 1, 2, 3});
  }
  CHECK(*reads == 7);
  CHECK(std::all_of(opened->begin(), opened->end(), [](std::uint64_t p) { return p == 0; }));
  // Replayed elements are the same tensors (shared handles), in every pass.
  auto a = collect(cached), b = collect(cached);
  REQUIRE(a.size() == 4);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].data() == b[i].data());
  // Downstream transforms see it as any dataset: a shuffle over the cache still reshuffles per pass.
  const auto shuffled = values(cached.shuffle(4, 11).repeat(2));
  CHECK(shuffled == values(counted.cache().shuffle(4, 11).repeat(2)));
  CHECK(std::vector<std::int32_t>(shuffled.begin(), shuffled.begin() + 4) !=
        std::vector<std::int32_t>(shuffled.begin() + 4, shuffled.end()));
  CHECK(values(cached.batch(3).prefetch(2).map([](const fx::tensor<std::int32_t>& t) { return fx::reduce_sum(t); })) ==
        std::vector<std::int32_t>{3, 3});
}

TEST_CASE("cache: an upstream that throws fills nothing, and the next pass tries again") {
  auto fail = std::make_shared<bool>(true);
  fx::data::dataset<fx::tensor<std::int32_t>> flaky([fail]() -> fx::data::dataset<fx::tensor<std::int32_t>>::next_fn {
    return [fail, i = 0]() mutable -> std::optional<fx::tensor<std::int32_t>> {
      if (i == 2 && *fail) throw fx::io_error("flaky: read error at element 2");
      if (i == 3) return std::nullopt;
      return fx::tensor<std::int32_t>(i++);
    };
  });
  auto cached = flaky.cache();
  CHECK_THROWS_WITH_AS(values(cached), "flaky: read error at element 2", fx::io_error);
  *fail = false;
  CHECK(values(cached) == std::vector<std::int32_t>{0, 1, 2});
  *fail = true;  // filled: the upstream is not read again
  CHECK(values(cached) == std::vector<std::int32_t>{0, 1, 2});
}

TEST_CASE("zip: pairs, ends with the shorter") {
  auto z = range(5).zip(range(3).map([](const fx::tensor<std::int32_t>& t) { return t * 10; }));
  CHECK(z.cardinality() == 3);
  std::vector<std::pair<int, int>> got;
  for (auto [a, b] : z) got.emplace_back(a.data()[0], b.data()[0]);
  CHECK(got == std::vector<std::pair<int, int>>{{0, 0}, {1, 10}, {2, 20}});
  CHECK(range(2).zip(range(4).repeat()).cardinality() == 2);
}

TEST_CASE("prefetch: the same sequence, exceptions rethrown, early destruction stops the thread") {
  const auto plain = range(200).shuffle(50, 9).batch(7);
  auto a = collect(plain), b = collect(range(200).shuffle(50, 9).batch(7).prefetch(3));
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].to_vector() == b[i].to_vector());
  CHECK(range(200).prefetch(2).cardinality() == 200);

  auto failing = range(10).map([](const fx::tensor<std::int32_t>& t) {
    if (t.data()[0] == 6) throw fx::io_error("reader: element 6 is bad");
    return t;
  });
  auto it = failing.prefetch(2).open();
  for (int i = 0; i < 6; ++i) {
    auto e = it.next();
    REQUIRE(e);
    CHECK(e->data()[0] == i);
  }
  CHECK_THROWS_WITH_AS(it.next(), "reader: element 6 is bad", fx::io_error);
  CHECK(!it.next());

  // Dropping an iterator mid-stream of an endless dataset must join its thread promptly.
  auto produced = std::make_shared<std::atomic<int>>(0);
  {
    auto counting = range(4).repeat().map([produced](const fx::tensor<std::int32_t>& t) {
      ++*produced;
      return t;
    });
    auto endless = counting.prefetch(4).open();
    for (int i = 0; i < 10; ++i) CHECK(endless.next());
  }
  const int after = produced->load();
  CHECK(after <= 10 + 4 + 1);  // the queue is bounded
  CHECK_THROWS_AS(range(3).prefetch(0), fx::invalid_argument);
}

TEST_CASE("prefetch: while the consumer runs parallel regions, elements come in order whoever makes them") {
  const int saved_threads = fx::get_num_threads();
  fx::set_num_threads(2);
  // The consumer computes (parallel regions the pool's worker spins between) while the elements
  // are made: by the worker, the background thread or the consumer itself, as timing decides. The
  // order is the upstream's whoever makes them, an exception is rethrown in its place, and a map's
  // own fx statements run correctly on any of those threads.
  auto pipeline = [&](int fail_at) {
    return range(300)
        .map([=](const fx::tensor<std::int32_t>& t) {
          if (t.data()[0] == fail_at) throw fx::io_error("map: element " + std::to_string(fail_at));
          fx::tensor<float> big = fx::full<float>({50000}, static_cast<float>(t.data()[0]));
          fx::tensor<float> s = fx::reduce_sum(big * 2.f);  // parallel-sized work inside the map
          return std::make_tuple(t, s);
        })
        .shuffle(40, 3)
        .batch(4)
        .prefetch(2);
  };
  const auto expected = collect(range(300).shuffle(40, 3).batch(4));
  fx::tensor<float> a = fx::full<float>({300000}, 1.f);
  std::size_t i = 0;
  for (auto [t, s] : pipeline(-1)) {
    REQUIRE(i < expected.size());
    CHECK(t.to_vector() == expected[i].to_vector());
    for (int k = 0; k < 4; ++k) CHECK(s.data()[k] == 100000.f * static_cast<float>(t.data()[k]));
    fx::tensor<float> busy = fx::reduce_sum(a * 3.f);  // a region per step
    CHECK(busy.item() == 900000.f);
    ++i;
  }
  CHECK(i == expected.size());

  auto it = pipeline(123).open();
  int seen = 0;
  CHECK_THROWS_WITH_AS(
      [&] {
        while (auto e = it.next()) {
          fx::tensor<float> busy = fx::reduce_sum(a * 3.f);
          seen += static_cast<int>(std::get<0>(*e).size());
        }
      }(),
      "map: element 123", fx::io_error);
  CHECK(seen < 300);
  CHECK(!it.next());
  fx::set_num_threads(saved_threads);
}

TEST_CASE("shard: every n-th element from an index, as tf.data's; the shards partition the dataset") {
  CHECK(values(range(10).shard(3, 0)) == std::vector<std::int32_t>{0, 3, 6, 9});
  CHECK(values(range(10).shard(3, 1)) == std::vector<std::int32_t>{1, 4, 7});
  CHECK(values(range(10).shard(3, 2)) == std::vector<std::int32_t>{2, 5, 8});
  CHECK(range(10).shard(3, 0).cardinality() == 4);
  CHECK(range(10).shard(3, 2).cardinality() == 3);
  CHECK(range(2).shard(3, 2).cardinality() == 0);
  CHECK(values(range(2).shard(3, 2)).empty());
  CHECK(values(range(4).shard(1, 0)) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(range(4).repeat().shard(2, 1).cardinality() == fx::data::infinite_cardinality);
  CHECK(values(range(4).repeat().shard(2, 1).take(3)) == std::vector<std::int32_t>{1, 3, 1});
  // Every pass the same, and the shards of a shuffled dataset (one seed) are disjoint and cover it.
  const auto shuffled = range(20).shuffle(20, 5, /*reshuffle_each_iteration=*/false);
  std::vector<std::int32_t> all = values(shuffled.shard(2, 0));
  const auto second = values(shuffled.shard(2, 1));
  all.insert(all.end(), second.begin(), second.end());
  std::sort(all.begin(), all.end());
  CHECK(all == values(range(20)));
  CHECK_THROWS_WITH_AS(range(4).shard(0, 0), "shard: num_shards must be at least 1, got 0", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(range(4).shard(2, 2), "shard: index = 2 is not in [0, 2)", fx::out_of_range);
  CHECK_THROWS_WITH_AS(range(4).shard(2, -1), "shard: index = -1 is not in [0, 2)", fx::out_of_range);
}

TEST_CASE("skip, filter and concatenate: tf.data's, against values by hand") {
  // skip: all but the first n; take(n) and skip(n) split a dataset in two.
  CHECK(values(range(5).skip(2)) == std::vector<std::int32_t>{2, 3, 4});
  CHECK(range(5).skip(2).cardinality() == 3);
  CHECK(values(range(5).skip(0)) == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(values(range(5).skip(9)).empty());
  CHECK(range(5).skip(9).cardinality() == 0);
  CHECK(values(range(5).skip(-1)).empty());
  CHECK(range(3).repeat().skip(-1).cardinality() == 0);
  CHECK(values(range(3).repeat().skip(4).take(4)) == std::vector<std::int32_t>{1, 2, 0, 1});
  CHECK(range(3).repeat().skip(4).cardinality() == fx::data::infinite_cardinality);
  const auto shuffled = range(20).shuffle(20, 5);
  auto all = values(shuffled.take(20)), head = values(shuffled.take(6)), tail = values(shuffled.skip(6));
  CHECK(head.size() + tail.size() == 20);
  head.insert(head.end(), tail.begin(), tail.end());
  CHECK(head == values(range(20).shuffle(20, 5).take(20)));  // pass 0 of each: the same permutation, split
  CHECK_THROWS_WITH_AS(range(3).skip(-2), "skip: count must be -1 (all) or at least 0, got -2", fx::invalid_argument);

  // filter: the elements the predicate keeps, of a tensor or of a tuple's parts.
  auto even = [](const fx::tensor<std::int32_t>& t) { return t.item() % 2 == 0; };
  CHECK(values(range(7).filter(even)) == std::vector<std::int32_t>{0, 2, 4, 6});
  CHECK(range(7).filter(even).cardinality() == fx::data::unknown_cardinality);
  CHECK(values(range(7).filter([](const fx::tensor<std::int32_t>&) { return false; })).empty());
  const auto pairs = range(6).zip(range(6).map([](const fx::tensor<std::int32_t>& t) { return t * 10; }));
  auto big = pairs.filter([](const fx::tensor<std::int32_t>& a, const fx::tensor<std::int32_t>& b) {
    return a.item() + b.item() > 30;
  });
  std::vector<std::int32_t> kept;
  for (const auto& [a, b] : big) kept.push_back(b.item());
  CHECK(kept == std::vector<std::int32_t>{30, 40, 50});
  // An endless dataset filtered stays lazy: take ends it.
  CHECK(values(range(4).repeat().filter(even).take(5)) == std::vector<std::int32_t>{0, 2, 0, 2, 0});

  // concatenate: one, then the other, each at the same pass; cardinalities add.
  CHECK(values(range(3).concatenate(range(2))) == std::vector<std::int32_t>{0, 1, 2, 0, 1});
  CHECK(range(3).concatenate(range(2)).cardinality() == 5);
  CHECK(values(range(0).concatenate(range(2))) == std::vector<std::int32_t>{0, 1});
  CHECK(values(range(2).concatenate(range(0))) == std::vector<std::int32_t>{0, 1});
  CHECK(range(2).concatenate(range(1).repeat()).cardinality() == fx::data::infinite_cardinality);
  CHECK(range(2).filter(even).concatenate(range(1)).cardinality() == fx::data::unknown_cardinality);
  const auto a = range(8).shuffle(8, 2), b = range(8).shuffle(8, 3);
  auto joined = a.concatenate(b);
  std::vector<std::int32_t> p1;
  for (auto it = joined.begin(1); !(it == joined.end()); ++it) p1.push_back(it->item());
  std::vector<std::int32_t> want;
  for (const auto* ds : {&a, &b})
    for (auto it = ds->begin(1); !(it == ds->end()); ++it) want.push_back(it->item());
  CHECK(p1 == want);
}
