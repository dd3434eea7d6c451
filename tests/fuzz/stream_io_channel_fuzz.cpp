// io_channel against a sequential model: two channels share one io_thread, and the input
// decodes submissions of tasks that succeed or throw, waits, discards and cancellations.
// The model says what each call must do (a submission after a failure rethrows it, after
// cancel() it throws frugal::runtime_error; a wait for every task returns exactly when none
// of the channel's tasks since the last discard threw); the execution log must show one FIFO
// across both channels and no task of a channel run after its failure (until a discard).
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <frugal/stream/io_thread.hpp>

#include "fuzz.hpp"

namespace {

struct task_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ran {
    std::uint64_t seq;
    int channel;
    std::uint64_t epoch;  // the channel's discard count when the task was submitted
    bool threw;
};

struct model {
    bool cancelled = false;
    bool failing = false;        // a throwing task was accepted since the last discard
    std::uint64_t epoch = 0;     // discards so far
    std::uint64_t accepted = 0;  // tasks accepted since the last discard
    std::uint64_t done = 0;      // their on_done count (guarded by the thread's mutex)
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    std::mutex log_mutex;
    std::vector<ran> log;
    {
        frugal::stream::io_thread thread;
        frugal::stream::io_channel channels[2] = {frugal::stream::io_channel(thread), frugal::stream::io_channel(thread)};
        model m[2];
        std::uint64_t seq = 0;
        for (int op = 0; op < 64 && !in.empty(); ++op) {
            const int c = static_cast<int>(in.below(2));
            auto& io = channels[c];
            auto& s = m[c];
            switch (in.below(6)) {
            case 0:
            case 1:
            case 2: {  // submit a task, one in four throwing
                const bool throws = in.below(4) == 0;
                const ran r{seq, c, s.epoch, throws};
                try {
                    io.submit(
                        [&log, &log_mutex, r] {
                            {
                                std::lock_guard lock(log_mutex);
                                log.push_back(r);
                            }
                            if (r.threw) throw task_failure("task failed");
                        },
                        [&s] { ++s.done; });
                    FRUGAL_FUZZ_CHECK(!s.cancelled, "a cancelled channel took a task");
                    ++seq;
                    ++s.accepted;
                    s.failing = s.failing || throws;
                } catch (const frugal::runtime_error&) {
                    FRUGAL_FUZZ_CHECK(s.cancelled, "submit threw frugal::runtime_error on a live channel");
                } catch (const task_failure&) {
                    FRUGAL_FUZZ_CHECK(!s.cancelled && s.failing, "submit rethrew a failure no task of the channel had");
                }
                break;
            }
            case 3:  // wait for every accepted task
                try {
                    io.wait([&] { return s.done == s.accepted; });
                    FRUGAL_FUZZ_CHECK(!s.cancelled && !s.failing, "wait returned with a failed task or after cancel");
                } catch (const frugal::runtime_error&) {
                    FRUGAL_FUZZ_CHECK(s.cancelled, "wait threw frugal::runtime_error on a live channel");
                } catch (const task_failure&) {
                    FRUGAL_FUZZ_CHECK(!s.cancelled && s.failing, "wait rethrew a failure that did not happen");
                }
                break;
            case 4:  // discard
                try {
                    io.discard();
                    FRUGAL_FUZZ_CHECK(!s.cancelled, "discard after cancel did not throw");
                    ++s.epoch;
                    s.failing = false;
                    io.locked([&] { s.done = s.accepted = 0; });
                } catch (const frugal::runtime_error&) {
                    FRUGAL_FUZZ_CHECK(s.cancelled, "discard threw on a live channel");
                }
                break;
            default:  // cancel, rarely
                if (in.below(4) == 0) {
                    io.cancel();
                    s.cancelled = true;
                }
                break;
            }
        }
    }  // the channels cancel, the thread joins: the log is complete
    for (std::size_t i = 1; i < log.size(); ++i)
        FRUGAL_FUZZ_CHECK(log[i - 1].seq < log[i].seq, "task %llu ran after task %llu: not one FIFO",
                          static_cast<unsigned long long>(log[i].seq), static_cast<unsigned long long>(log[i - 1].seq));
    for (std::size_t i = 0; i < log.size(); ++i) {
        if (!log[i].threw) continue;
        for (std::size_t j = i + 1; j < log.size(); ++j)
            FRUGAL_FUZZ_CHECK(log[j].channel != log[i].channel || log[j].epoch != log[i].epoch,
                              "channel %d ran task %llu after its task %llu failed", log[i].channel,
                              static_cast<unsigned long long>(log[j].seq), static_cast<unsigned long long>(log[i].seq));
    }
    return 0;
}
