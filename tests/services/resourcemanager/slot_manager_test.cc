// The SlotManager on a fake clock: registration and replacement, reports that rebuild or
// contradict the table (the report wins), heartbeat expiry, first-fit matching of declared
// requirements, requirements that wait for free slots, unfittable requirements, and counts.
#include "services/resourcemanager/slot_manager.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace regent::resourcemanager {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
const Profile kSmall{1000, 1 * kGiB};
const Profile kLarge{4000, 8 * kGiB};

WorkerRegistration registration(const ResourceId& id, uint32_t slots, Profile profile = kSmall,
                                std::string host = "host-a", uint32_t pid = 100) {
  WorkerRegistration out;
  out.resourceId = id;
  out.host = std::move(host);
  out.pid = pid;
  out.startedAtMs = 1;
  out.numberOfSlots = slots;
  out.slotProfile = profile;
  out.totalProfile = Profile{profile.cpuMillis * slots, profile.memoryBytes * slots};
  return out;
}

// `count` free slots of `profile`, indexes 0..count-1.
std::vector<ReportedSlot> freeSlots(uint32_t count, Profile profile = kSmall) {
  std::vector<ReportedSlot> slots(count);
  for (uint32_t i = 0; i < count; ++i) {
    slots[i].index = i;
    slots[i].profile = profile;
  }
  return slots;
}

class SlotManagerTest : public ::testing::Test {
 protected:
  // Registers and reports a worker with `count` free slots; returns its registration id.
  RegistrationId addWorker(const ResourceId& id, uint32_t count, Profile profile = kSmall) {
    const RegistrationId registrationId =
        slots_.registerWorker(registration(id, count, profile), now_, nowMs_);
    auto failure = slots_.applyReport(id, registrationId, freeSlots(count, profile), now_, nowMs_);
    EXPECT_TRUE(failure.ok()) << failure.error().message;
    return registrationId;
  }

  void advance(Duration by) {
    now_ += by;
    nowMs_ += by.count();
  }

  const Slot& slot(const ResourceId& worker, uint32_t index) {
    return slots_.worker(worker)->slots.at(index);
  }

  SlotManager slots_;
  MonoTime now_{};
  int64_t nowMs_ = 1700000000000;
};

TEST_F(SlotManagerTest, AReportedWorkerIsCountedWithItsFreeSlots) {
  const auto worker = ResourceId::random();
  const RegistrationId id = slots_.registerWorker(registration(worker, 4), now_, nowMs_);
  EXPECT_EQ(slots_.counts().workers, 1u);
  EXPECT_EQ(slots_.counts().reported, 0u);
  EXPECT_EQ(slots_.counts().total, 0u) << "slots are known from the report only";

  ASSERT_TRUE(slots_.applyReport(worker, id, freeSlots(4), now_, nowMs_));
  const SlotCounts counts = slots_.counts();
  EXPECT_EQ(counts.workers, 1u);
  EXPECT_EQ(counts.reported, 1u);
  EXPECT_EQ(counts.total, 4u);
  EXPECT_EQ(counts.free, 4u);
  EXPECT_EQ(counts.allocated, 0u);
  EXPECT_TRUE(slots_.worker(worker)->reported);
}

TEST_F(SlotManagerTest, ARequirementIsMatchedFirstFitInRegistrationOrder) {
  const auto first = ResourceId(0xff, 0xff);  // Sorts after `second` by id; registered first.
  const auto second = ResourceId(0x01, 0x01);
  addWorker(first, 2);
  addWorker(second, 2);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{Profile{500, kGiB / 2}, 3}}));

  const std::vector<SlotRequest> requests = slots_.match();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].worker, first);
  EXPECT_EQ(requests[0].slotIndex, 0u);
  EXPECT_EQ(requests[1].worker, first);
  EXPECT_EQ(requests[1].slotIndex, 1u);
  EXPECT_EQ(requests[2].worker, second);
  EXPECT_EQ(requests[2].slotIndex, 0u);
  EXPECT_EQ(requests[0].profile, kSmall) << "the request carries the slot's profile";
  EXPECT_NE(requests[0].allocation, requests[1].allocation);
  EXPECT_TRUE(slot(first, 0).pending);
  EXPECT_EQ(slots_.counts().pending, 3u);
  EXPECT_EQ(slots_.unmet(job), 0u);
  EXPECT_TRUE(slots_.match().empty()) << "pending slots count toward the requirement";

  slots_.confirmed(requests[0]);
  EXPECT_FALSE(slot(first, 0).pending);
  EXPECT_EQ(slot(first, 0).allocation, requests[0].allocation);
  EXPECT_EQ(slots_.counts().pending, 2u);
  EXPECT_EQ(slots_.counts().allocated, 3u);
  EXPECT_EQ(slots_.counts().free, 1u);
}

// match() looks only at the workers with a slot to choose; a worker that becomes one again (its
// job let the slots go, last worker first) is chosen in registration order all the same.
TEST_F(SlotManagerTest, WorkersWhoseSlotsFreeAgainAreMatchedInRegistrationOrder) {
  std::vector<ResourceId> workers;
  for (uint64_t i = 0; i < 4; ++i) {
    workers.push_back(ResourceId(0x40 - i, 1));  // Ids sort against registration order.
    addWorker(workers.back(), 1);
  }
  const auto holder = JobId::random();
  slots_.registerJob(holder);
  ASSERT_TRUE(slots_.declare(holder, {Requirement{kSmall, 4}}));
  ASSERT_EQ(slots_.match().size(), 4u);
  EXPECT_EQ(slots_.counts().free, 0u);
  const auto waiting = JobId::random();
  slots_.registerJob(waiting);
  ASSERT_TRUE(slots_.declare(waiting, {Requirement{kSmall, 2}}));
  EXPECT_TRUE(slots_.match().empty()) << "every slot is taken";

  // The holder lets its slots go: the waiting job gets the first two registered workers'.
  EXPECT_EQ(slots_.disconnectJob(holder).size(), 4u);
  const auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].worker, workers[0]);
  EXPECT_EQ(requests[1].worker, workers[1]);
  EXPECT_EQ(slots_.counts().free, 2u);
  // A third job is served by the two left, and a fourth waits.
  const auto third = JobId::random();
  slots_.registerJob(third);
  ASSERT_TRUE(slots_.declare(third, {Requirement{kSmall, 3}}));
  const auto rest = slots_.match();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].worker, workers[2]);
  EXPECT_EQ(rest[1].worker, workers[3]);
  EXPECT_EQ(slots_.unmet(third), 1u);
}

TEST_F(SlotManagerTest, OnlySlotsWhoseProfileFitsAreMatchedAndCounted) {
  const auto small = ResourceId::random();
  const auto large = ResourceId::random();
  addWorker(small, 2, kSmall);
  addWorker(large, 1, kLarge);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kLarge, 1}, Requirement{kSmall, 1}}));
  const auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].worker, large);
  EXPECT_EQ(requests[1].worker, small);
  EXPECT_EQ(slots_.unmet(job), 0u);
}

TEST_F(SlotManagerTest, ARequirementWaitsForFreeSlotsAndIsServedWhenAWorkerReports) {
  const auto busy = ResourceId::random();
  addWorker(busy, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 3}}));
  ASSERT_EQ(slots_.match().size(), 1u);
  EXPECT_EQ(slots_.unmet(job), 2u) << "two slots still wanted: the requirement waits";
  EXPECT_TRUE(slots_.match().empty());

  const auto late = ResourceId::random();
  const RegistrationId id = slots_.registerWorker(registration(late, 4), now_, nowMs_);
  EXPECT_TRUE(slots_.match().empty()) << "a worker's slots are matched once it reported";
  ASSERT_TRUE(slots_.applyReport(late, id, freeSlots(4), now_, nowMs_));
  const auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].worker, late);
  EXPECT_EQ(slots_.unmet(job), 0u);
  EXPECT_EQ(slots_.counts().free, 2u);
}

TEST_F(SlotManagerTest, ARequirementDeclaredWithNoWorkerWaitsForOne) {
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kLarge, 1}}));
  EXPECT_EQ(slots_.unmet(job), 1u);
  const auto worker = ResourceId::random();
  addWorker(worker, 1, kLarge);
  const auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].worker, worker);
}

TEST_F(SlotManagerTest, ARequirementNoRegisteredWorkerCanFitIsInvalidAndNamesBothProfiles) {
  addWorker(ResourceId::random(), 2, kSmall);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  auto failure = slots_.declare(job, {Requirement{kSmall, 1}, Requirement{kLarge, 1}});
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().error, SlotError::kInvalidArgument);
  EXPECT_EQ(failure.error().field, "requirements[1].profile");
  EXPECT_NE(failure.error().message.find("cpu=4.000 memory=8GiB"), std::string::npos)
      << failure.error().message;
  EXPECT_NE(failure.error().message.find("cpu=1.000 memory=1GiB"), std::string::npos)
      << failure.error().message;
  EXPECT_EQ(slots_.unmet(job), 1u) << "the refused declaration left the previous one in place";
}

TEST_F(SlotManagerTest, DeclaringForAJobThatDidNotRegisterIsNotRegistered) {
  auto failure = slots_.declare(JobId::random(), {Requirement{kSmall, 1}});
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().error, SlotError::kNotRegistered);
}

TEST_F(SlotManagerTest, AWorkerSilentPastTheTimeoutExpiresAndItsAllocationsAreWantedAgain) {
  const auto quiet = ResourceId::random();
  const auto chatty = ResourceId::random();
  addWorker(quiet, 1);
  const RegistrationId chattyRegistration = addWorker(chatty, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].worker, quiet);
  slots_.confirmed(requests[0]);

  advance(Duration(6000));
  std::vector<ReportedSlot> free = freeSlots(1);
  ASSERT_TRUE(slots_.applyReport(chatty, chattyRegistration, free, now_, nowMs_));
  EXPECT_TRUE(slots_.expire(now_, Duration(10000)).empty());
  advance(Duration(4001));  // quiet: 10.001 s of silence; chatty: 4.001 s.
  EXPECT_EQ(slots_.expire(now_, Duration(10000)), std::vector<ResourceId>{quiet});
  EXPECT_EQ(slots_.worker(quiet), nullptr);
  EXPECT_EQ(slots_.counts().workers, 1u);
  EXPECT_EQ(slots_.counts().total, 1u);
  EXPECT_EQ(slots_.unmet(job), 1u);
  requests = slots_.match();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].worker, chatty);
}

TEST_F(SlotManagerTest, TheReportWinsOverTheTable) {
  const auto worker = ResourceId::random();
  const RegistrationId id = addWorker(worker, 4);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 2}}));
  const auto requests = slots_.match();  // Slots 0 and 1 pending.
  ASSERT_EQ(requests.size(), 2u);
  slots_.confirmed(requests[0]);  // Slot 0 allocated for good; slot 1 still pending.

  // The worker says: slot 0 free (the table thought it allocated), slot 1 free (pending: the
  // worker has not taken the request yet), slot 3 allocated to an allocation the table lacks.
  const auto otherJob = JobId::random();
  const auto unknown = AllocationId::random();
  const auto attempt = AttemptId::random();
  std::vector<ReportedSlot> report = freeSlots(4);
  report[3].allocation = unknown;
  report[3].job = otherJob;
  report[3].runningAttempts = {attempt};
  ASSERT_TRUE(slots_.applyReport(worker, id, report, now_, nowMs_));

  EXPECT_FALSE(slot(worker, 0).allocation.has_value()) << "reported free: free";
  EXPECT_TRUE(slot(worker, 1).pending) << "pending and not yet reported: still pending";
  EXPECT_EQ(slot(worker, 1).allocation, requests[1].allocation);
  EXPECT_FALSE(slot(worker, 2).allocation.has_value());
  EXPECT_EQ(slot(worker, 3).allocation, unknown) << "an allocation only the worker knew";
  EXPECT_EQ(slot(worker, 3).job, otherJob);
  EXPECT_EQ(slot(worker, 3).runningAttempts, std::vector<AttemptId>{attempt});
  EXPECT_EQ(slots_.counts().allocated, 2u);
  EXPECT_EQ(slots_.counts().pending, 1u);
  EXPECT_EQ(slots_.unmet(job), 1u) << "slot 0 is gone from the job";

  // The worker then lists the pending allocation: it is allocated for good.
  report[1].allocation = requests[1].allocation;
  report[1].job = job;
  ASSERT_TRUE(slots_.applyReport(worker, id, report, now_, nowMs_));
  EXPECT_FALSE(slot(worker, 1).pending);
  EXPECT_EQ(slots_.counts().pending, 0u);
}

TEST_F(SlotManagerTest, AReportRebuildsAllocationsAfterAFailover) {
  const auto worker = ResourceId::random();
  const auto job = JobId::random();
  const auto allocation = AllocationId::random();
  const RegistrationId id = slots_.registerWorker(registration(worker, 2), now_, nowMs_);
  std::vector<ReportedSlot> report = freeSlots(2);
  report[1].allocation = allocation;
  report[1].job = job;
  ASSERT_TRUE(slots_.applyReport(worker, id, report, now_, nowMs_));
  EXPECT_EQ(slot(worker, 1).allocation, allocation);
  EXPECT_FALSE(slot(worker, 1).pending);

  // The job's JobMaster registers later and declares one slot: the reported one serves it.
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  EXPECT_EQ(slots_.unmet(job), 0u);
  EXPECT_TRUE(slots_.match().empty());
}

TEST_F(SlotManagerTest, AMalformedReportIsRefusedNamingTheFieldAndChangesNothing) {
  const auto worker = ResourceId::random();
  const RegistrationId id = addWorker(worker, 2);
  std::vector<ReportedSlot> report = freeSlots(2);
  report[1].index = 0;
  report[0].allocation = AllocationId::random();
  report[0].job = JobId::random();
  auto failure = slots_.applyReport(worker, id, report, now_, nowMs_);
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().error, SlotError::kInvalidArgument);
  EXPECT_EQ(failure.error().field, "slots[1].slotId.slotIndex");
  report = freeSlots(3);
  failure = slots_.applyReport(worker, id, report, now_, nowMs_);
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().field, "slots[2].slotId.slotIndex");
  EXPECT_EQ(slots_.counts().allocated, 0u);
  EXPECT_EQ(slots_.counts().total, 2u);
}

TEST_F(SlotManagerTest, ANewRegistrationReplacesTheOldOneWhoseIdIsThenNotRegistered) {
  const auto worker = ResourceId::random();
  const RegistrationId old = addWorker(worker, 2);
  const RegistrationId fresh = slots_.registerWorker(registration(worker, 3), now_, nowMs_);
  EXPECT_NE(old, fresh);
  EXPECT_EQ(slots_.counts().workers, 1u);
  EXPECT_EQ(slots_.counts().total, 0u) << "the old registration's slots are dropped";

  auto failure = slots_.applyReport(worker, old, freeSlots(2), now_, nowMs_);
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().error, SlotError::kNotRegistered);
  EXPECT_NE(failure.error().message.find(old.toHex()), std::string::npos)
      << failure.error().message;

  ASSERT_TRUE(slots_.applyReport(worker, fresh, freeSlots(3), now_, nowMs_));
  EXPECT_EQ(slots_.counts().total, 3u);
  EXPECT_EQ(slots_.worker(worker)->registrationId, fresh);
}

TEST_F(SlotManagerTest, AReportFromAnUnknownWorkerIsNotRegistered) {
  auto failure = slots_.applyReport(ResourceId::random(), RegistrationId::random(), freeSlots(1),
                                    now_, nowMs_);
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.error().error, SlotError::kNotRegistered);
}

TEST_F(SlotManagerTest, RemoveWorkerDropsItAndItsSlots) {
  const auto worker = ResourceId::random();
  addWorker(worker, 4);
  addWorker(ResourceId::random(), 2);
  EXPECT_TRUE(slots_.removeWorker(worker));
  EXPECT_FALSE(slots_.removeWorker(worker));
  EXPECT_EQ(slots_.worker(worker), nullptr);
  EXPECT_EQ(slots_.counts().workers, 1u);
  EXPECT_EQ(slots_.counts().total, 2u);
  EXPECT_EQ(slots_.counts().free, 2u);
}

TEST_F(SlotManagerTest, DisconnectJobReturnsItsAllocationsAndFreesThem) {
  const auto a = ResourceId::random();
  const auto b = ResourceId::random();
  addWorker(a, 1);
  addWorker(b, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 2}}));
  const auto requests = slots_.match();
  ASSERT_EQ(requests.size(), 2u);
  slots_.confirmed(requests[0]);

  const std::vector<SlotRelease> releases = slots_.disconnectJob(job);
  ASSERT_EQ(releases.size(), 2u);
  EXPECT_EQ(releases[0].allocation == requests[0].allocation ||
                releases[1].allocation == requests[0].allocation,
            true);
  EXPECT_FALSE(slots_.jobRegistered(job));
  EXPECT_EQ(slots_.counts().allocated, 0u);
  EXPECT_EQ(slots_.counts().free, 2u);
  EXPECT_TRUE(slots_.match().empty()) << "the job's requirements went with it";
}

// The slot of a failed requestSlot is free again but not chosen again until its worker's next
// report (a heartbeat): matching at once would pick the same slot and fail the same way.
TEST_F(SlotManagerTest, AFailedRequestFreesTheSlotForMatchingAfterItsWorkersNextReport) {
  const auto worker = ResourceId::random();
  const RegistrationId id = addWorker(worker, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  const auto first = slots_.match();
  ASSERT_EQ(first.size(), 1u);
  slots_.requestFailed(first[0]);
  EXPECT_EQ(slots_.counts().free, 1u);
  EXPECT_EQ(slots_.unmet(job), 1u);
  EXPECT_TRUE(slots_.match().empty()) << "the same slot again, at once";

  ASSERT_TRUE(slots_.applyReport(worker, id, freeSlots(1), now_, nowMs_));
  const auto second = slots_.match();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].allocation, first[0].allocation);
  slots_.requestFailed(first[0]);  // A late answer for the old allocation changes nothing.
  EXPECT_TRUE(slot(worker, 0).pending);
  EXPECT_EQ(slot(worker, 0).allocation, second[0].allocation);
}

TEST_F(SlotManagerTest, AFailedRequestIsMatchedOnAnotherWorkersFreeSlot) {
  const auto refusing = ResourceId::random();
  const auto other = ResourceId::random();
  addWorker(refusing, 1);
  addWorker(other, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  const auto first = slots_.match();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].worker, refusing);
  slots_.requestFailed(first[0]);
  const auto second = slots_.match();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].worker, other);
}

TEST_F(SlotManagerTest, AFaultedSlotGoesToAnotherWorkerAndItsWorkerServesAgainAfterItsReport) {
  const auto faulty = ResourceId::random();
  const auto other = ResourceId::random();
  const RegistrationId faultyId = addWorker(faulty, 2);
  addWorker(other, 1);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  const auto first = slots_.match();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].worker, faulty);
  slots_.confirmed(first[0]);
  EXPECT_FALSE(slots_.slotFaulted(faulty, AllocationId::random(), job)) << "unknown allocation";
  EXPECT_FALSE(slots_.slotFaulted(faulty, first[0].allocation, JobId::random())) << "other job";
  EXPECT_FALSE(slots_.slotFaulted(other, first[0].allocation, job)) << "other worker";

  ASSERT_TRUE(slots_.slotFaulted(faulty, first[0].allocation, job));
  EXPECT_FALSE(slot(faulty, first[0].slotIndex).allocation);
  EXPECT_EQ(slots_.unmet(job), 1u);
  // Neither the faulted slot nor the worker's other free one: the other worker's.
  const auto second = slots_.match();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].worker, other);

  // A second job finds only the faulty worker's slots, and gets one after its next report.
  slots_.confirmed(second[0]);
  const auto next = JobId::random();
  slots_.registerJob(next);
  ASSERT_TRUE(slots_.declare(next, {Requirement{kSmall, 1}}));
  EXPECT_TRUE(slots_.match().empty());
  ASSERT_TRUE(slots_.applyReport(faulty, faultyId, freeSlots(2), now_, nowMs_));
  const auto third = slots_.match();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].worker, faulty);
  EXPECT_EQ(third[0].job, next);
}

// The worker registered again (its slots dropped) and reported the slot free before it took
// the request; its acceptance then allocates the slot, which the worker holds.
TEST_F(SlotManagerTest, AConfirmationAfterTheWorkerRegisteredAgainAllocatesTheFreeSlot) {
  const auto worker = ResourceId::random();
  addWorker(worker, 2);
  const auto job = JobId::random();
  slots_.registerJob(job);
  ASSERT_TRUE(slots_.declare(job, {Requirement{kSmall, 1}}));
  const auto requested = slots_.match();
  ASSERT_EQ(requested.size(), 1u);
  const RegistrationId again = slots_.registerWorker(registration(worker, 2), now_, nowMs_);
  ASSERT_TRUE(slots_.applyReport(worker, again, freeSlots(2), now_, nowMs_));
  slots_.confirmed(requested[0]);
  const Slot& held = slot(worker, requested[0].slotIndex);
  EXPECT_EQ(held.allocation, requested[0].allocation);
  EXPECT_EQ(held.job, job);
  EXPECT_FALSE(held.pending);
  EXPECT_EQ(slots_.counts().allocated, 1u);
  EXPECT_EQ(slots_.unmet(job), 0u);
  EXPECT_TRUE(slots_.match().empty());
}

TEST(ProfileTest, DescribeNamesCpuInCoresAndMemoryInItsLargestWholeUnit) {
  EXPECT_EQ(describe(Profile{1000, uint64_t{1} << 30}), "cpu=1.000 memory=1GiB");
  EXPECT_EQ(describe(Profile{250, 512 * 1024 * 1024}), "cpu=0.250 memory=512MiB");
  EXPECT_EQ(describe(Profile{0, 1000}), "cpu=0.000 memory=1000B");
}

}  // namespace
}  // namespace regent::resourcemanager
