// The reservoir the mlp prior trains from: bounded, uniform, deterministic, restorable.
#include "emmy/prior_reservoir.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace emmy {
namespace {

TEST(PriorReservoir, StaysAtCapacityAndCountsWhatItSaw) {
  Reservoir<int> r(100, 7);
  for (int i = 0; i < 5000; ++i) r.offer(i);
  EXPECT_EQ(r.size(), 100u);
  EXPECT_EQ(r.seen(), 5000u);
}

TEST(PriorReservoir, KeepsEverythingBelowCapacity) {
  Reservoir<int> r(10, 7);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(r.offer(i));
  EXPECT_EQ(r.items(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(PriorReservoir, OfferSlotNamesWhereTheItemWentAndSamplesAsOfferDoes) {
  Reservoir<int> slots(20, 5), plain(20, 5);
  int kept = 0, dropped = 0;
  for (int i = 0; i < 500; ++i) {
    const std::vector<int> before = slots.items();
    const size_t slot = slots.offer_slot(i);
    plain.offer(i);
    if (slot == Reservoir<int>::kNotKept) {
      ++dropped;
      EXPECT_EQ(slots.items(), before) << "item " << i << " not kept, yet the sample changed";
      continue;
    }
    ++kept;
    ASSERT_LT(slot, slots.size());
    EXPECT_EQ(slots.items()[slot], i);
    for (size_t j = 0; j < before.size(); ++j) {  // nothing else moved
      if (j != slot) {
        EXPECT_EQ(slots.items()[j], before[j]) << "item " << i << ", slot " << j;
      }
    }
  }
  EXPECT_GT(kept, 20);  // appends, then replacements
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(slots.items(), plain.items());
}

TEST(PriorReservoir, SamplesEveryPartOfTheStreamAlike) {
  // 200 trials of a 1000-item stream into 100 slots: each tenth of the stream should hold ~10%
  // of the sample (expected 2000 per tenth; a binomial spread of ~42). Early items must not be
  // favoured (a common bug), nor late ones.
  std::vector<int> per_tenth(10, 0);
  for (int trial = 0; trial < 200; ++trial) {
    Reservoir<int> r(100, 1000 + trial);
    for (int i = 0; i < 1000; ++i) r.offer(i);
    for (int v : r.items()) ++per_tenth[v / 100];
  }
  for (int count : per_tenth) {
    EXPECT_GT(count, 1800);
    EXPECT_LT(count, 2200);
  }
}

TEST(PriorReservoir, SameSeedSameSampleAndRestoreContinuesIdentically) {
  Reservoir<int> a(50, 3), b(50, 3);
  for (int i = 0; i < 400; ++i) {
    a.offer(i);
    b.offer(i);
  }
  EXPECT_EQ(a.items(), b.items());

  Reservoir<int> c(50, 999);
  c.restore(a.items(), a.seen(), a.rng_state());
  for (int i = 400; i < 900; ++i) {
    a.offer(i);
    c.offer(i);
  }
  EXPECT_EQ(a.items(), c.items());
  EXPECT_EQ(a.seen(), c.seen());
}

TEST(PriorReservoir, RestoreRefusesImpossibleStates) {
  Reservoir<int> r(2, 1);
  EXPECT_THROW(r.restore({1, 2, 3}, 3, r.rng_state()), Error);
  EXPECT_THROW(r.restore({1, 2}, 1, r.rng_state()), Error);
  EXPECT_THROW(r.restore({1}, 1, "not a generator"), Error);
  EXPECT_THROW(Reservoir<int>(0, 1), Error);
}

}  // namespace
}  // namespace emmy
