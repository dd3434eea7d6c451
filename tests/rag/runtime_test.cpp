// rag_runtime in wall-clock time (run under TSan in the tsan preset): requests submitted and
// cancelled from several threads each end exactly once; finished ones reach the state they
// reach alone (the oracle of rag_oracle.hpp); the two sides overlap; a replay of the recorded
// calls into a fresh decision core makes the same decisions; a failing generator or retriever
// fails the requests of its batch only; deadlines, stage timeouts and the admission limit hold.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "frugal/core/thread_pool.hpp"
#include "frugal/rag/runtime.hpp"
#include "frugal/rag/scheduler.hpp"
#include "frugal/sim/rag_event_loop.hpp"
#include "frugal/sim/rag_simulation.hpp"
#include "frugal_test_errors.hpp"
#include "rag_oracle.hpp"

namespace {

using frugal::rag::rag_status;
using frugal::rag::rag_trace_event;
using namespace std::chrono_literals;

// A device stand-in: the simulated generator, holding each step for a tenth of its modelled
// time on the calling thread (a GPU computes while the CPU searches), optionally failing the
// steps that include one request.
class timed_generator {
public:
    explicit timed_generator(double scale = 0.1, std::size_t fail_with = SIZE_MAX) : scale_(scale), fail_with_(fail_with) {}
    double step(std::span<const frugal::rag::generation_slot> batch) {
        busy_.store(true);
        for (const auto& s : batch)
            if (s.request == fail_with_) {
                busy_.store(false);
                throw std::runtime_error("device fault at request " + std::to_string(s.request));
            }
        const double ms = inner_.step(batch);
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms * scale_));
        busy_.store(false);
        return ms;
    }
    double step_time(std::size_t b, std::size_t c) const { return inner_.step_time(b, c); }
    std::size_t length(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { return inner_.length(s, n); }
    void commit(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) { inner_.commit(s, n); }
    void discard(std::size_t r) { inner_.discard(r); }
    void preview(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { inner_.preview(s, n); }
    [[nodiscard]] bool busy() const noexcept { return busy_.load(); }

private:
    frugal::sim::simulated_generator inner_;
    double scale_;
    std::size_t fail_with_;
    std::atomic<bool> busy_{false};
};
static_assert(frugal::rag::rag_previewing_generator<timed_generator>);

// The simulated retriever, holding each search for a tenth of its modelled time, noting
// whether the generator was stepping meanwhile, optionally failing searches for one request.
class timed_retriever {
public:
    timed_retriever(const timed_generator& gen, double scale = 0.1, std::size_t fail_with = SIZE_MAX)
        : gen_(gen), scale_(scale), fail_with_(fail_with) {}
    std::uint64_t query_of(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { return inner_.query_of(s, n); }
    std::vector<std::size_t> probe(std::uint64_t q) const { return inner_.probe(q); }
    double cluster_time(std::size_t c) const { return inner_.cluster_time(c); }
    std::size_t list_of(std::uint64_t id) const { return inner_.list_of(id); }
    double search(std::span<const frugal::rag::retrieval_slot<std::uint64_t>> batch) {
        for (const auto& s : batch)
            if (s.request == fail_with_) throw std::runtime_error("index fault at request " + std::to_string(s.request));
        const double ms = inner_.search(batch);
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms * scale_);
        while (std::chrono::steady_clock::now() < until) {
            if (gen_.busy()) overlapped_.store(true);
            std::this_thread::sleep_for(200us);
        }
        return ms;
    }
    [[nodiscard]] bool overlapped() const noexcept { return overlapped_.load(); }

private:
    const timed_generator& gen_;
    frugal::sim::simulated_retriever inner_{frugal::sim::simulated_retriever::config{.nprobe = 64}};
    double scale_;
    std::size_t fail_with_;
    std::atomic<bool> overlapped_{false};
};
static_assert(frugal::rag::rag_ordered_retriever<timed_retriever>);
static_assert(frugal::rag::rag_clock<frugal::sim::rag_event_loop<timed_generator, timed_retriever>>);

struct workflows {
    frugal::rag::rag_graph one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(),
                           multi = frugal::rag::multistep_workflow();
    [[nodiscard]] const frugal::rag::rag_graph& pick(std::size_t i) const { return i % 3 == 0 ? one : i % 3 == 1 ? hyde : multi; }
    [[nodiscard]] static frugal::rag::rag_state state_for(std::size_t i) {
        frugal::rag::rag_state s{.input = "question " + std::to_string(i)};
        if (i % 3 == 2) s.values["subquestions"] = std::int64_t(1 + i % 3);
        return s;
    }
};

// The recorded calls of a run, replayed into a fresh core on fresh models (one thread): it
// must make the same decisions at every step.
std::vector<rag_trace_event> replay(const std::vector<rag_trace_event>& trace, const workflows& w,
                                    const std::map<std::size_t, std::size_t>& submission_of,
                                    const frugal::rag::rag_schedule_options& opt) {
    timed_generator gen(0.0);
    timed_retriever ret(gen, 0.0);
    frugal::rag::rag_scheduler core(gen, ret, opt);
    std::vector<rag_trace_event> again;
    core.set_observer([&](const rag_trace_event& e) { again.push_back(e); });
    std::optional<frugal::rag::generation_batch> gb;
    frugal::rag::generation_report gr;
    std::optional<frugal::rag::retrieval_batch<std::uint64_t>> rb;
    using kind = rag_trace_event::kind;
    for (const rag_trace_event& e : trace) {
        switch (e.what) {
        case kind::submit: {
            const std::size_t i = submission_of.at(e.members.at(0));
            (void)core.submit(w.pick(i), workflows::state_for(i), e.now);
            break;
        }
        case kind::generation_batch:
            gb = core.next_generation_batch(e.now);
            if (gb) gr = frugal::rag::run_generation_batch(gen, *gb);
            break;
        case kind::generation_done:
            core.generation_done(*gb, gr, e.duration, e.now);
            gb.reset();
            break;
        case kind::retrieval_batch:
            rb = core.next_retrieval_batch(e.now);
            if (rb) (void)ret.search(rb->slots);
            break;
        case kind::retrieval_done:
            core.retrieval_done(*rb, e.duration, e.now);
            rb.reset();
            break;
        case kind::cancel:
            (void)core.cancel(e.members.at(0), static_cast<rag_status>(e.detail.at(0)), "replayed", e.now);
            break;
        case kind::failed:
            if (gb && gb->id == e.batch) {
                core.generation_failed(*gb, std::make_exception_ptr(std::runtime_error("replayed")), e.now);
                gb.reset();
            } else {
                core.retrieval_failed(*rb, std::make_exception_ptr(std::runtime_error("replayed")), e.now);
                rb.reset();
            }
            break;
        }
        (void)core.take_finished();
    }
    return again;
}

TEST(RagRuntime, RequestsFromManyThreadsReachTheirStatesWithBothSidesOverlapping) {
    const workflows w;
    timed_generator gen;
    timed_retriever ret(gen);
    frugal::thread_pool cpu(2);
    const frugal::rag::rag_schedule_options opt{.policy = frugal::rag::rag_policy::wavefront};
    std::vector<rag_trace_event> trace;
    std::map<std::size_t, std::size_t> submission_of;  // core id -> submission
    std::mutex m;
    std::vector<std::future<frugal::rag::rag_result>> results(36);
    std::atomic<int> callbacks{0};
    {
        frugal::rag::rag_runtime rt(gen, ret, cpu, {.schedule = opt});
        rt.set_observer([&](const rag_trace_event& e) { trace.push_back(e); });
        std::vector<std::thread> clients;
        for (std::size_t t = 0; t < 3; ++t)
            clients.emplace_back([&, t] {
                std::mt19937 rng{static_cast<unsigned>(t)};
                for (std::size_t i = t; i < results.size(); i += 3) {
                    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
                    results[i] = rt.submit(w.pick(i), workflows::state_for(i), {.on_done = [&](const auto&) { ++callbacks; }});
                }
            });
        for (auto& c : clients) c.join();
        rt.drain();
        const auto metrics = rt.metrics();
        EXPECT_EQ(metrics.finished, results.size());
        EXPECT_EQ(metrics.in_flight, 0u);
        EXPECT_GT(metrics.generation_batches, 0u);
        EXPECT_GT(metrics.retrieval_batches, 0u);
        EXPECT_NE(frugal::rag::to_json(metrics).find("\"finished\": 36"), std::string::npos);
    }
    EXPECT_EQ(callbacks.load(), int(results.size()));
    std::vector<frugal::rag::rag_result> got;
    for (auto& f : results) got.push_back(f.get());
    for (std::size_t i = 0; i < results.size(); ++i) submission_of[got[i].state.request] = i;
    EXPECT_EQ(replay(trace, w, submission_of, opt), trace);
    for (std::size_t i = 0; i < results.size(); ++i) {
        frugal::rag::rag_result r = std::move(got[i]);
        ASSERT_EQ(r.status, rag_status::finished) << r.error;
        const auto expect = frugal::rag::testing::walk_alone(w.pick(i), workflows::state_for(i), r.state.request, 128,
                                                             {.nprobe = 64});
        EXPECT_EQ(r.state.values, expect.values) << "request " << i;
        EXPECT_EQ(r.state.retrieved, expect.retrieved) << "request " << i;
        EXPECT_GT(r.metrics.end_to_end_ms, 0.0);
        EXPECT_GE(r.metrics.end_to_end_ms, r.metrics.first_token_ms);
        EXPECT_GT(r.metrics.decode_steps, 0u);
    }
    EXPECT_TRUE(ret.overlapped()) << "no retrieval ran while the generator stepped";
}

TEST(RagRuntime, EveryRequestEndsExactlyOnceUnderCancellationDeadlinesAndFaults) {
    // Requests submitted from three threads, a third of them stopped at random moments, some
    // with short deadlines; the generator fails every batch holding request 5 and the
    // retriever every batch holding request 11. Each request ends once; the ones in no
    // failed batch, not stopped and not late, finish with the state they reach alone.
    const workflows w;
    timed_generator gen(0.1, 5);
    timed_retriever ret(gen, 0.1, 11);
    frugal::thread_pool cpu(2);
    const frugal::rag::rag_schedule_options opt{.policy = frugal::rag::rag_policy::wavefront};
    std::vector<rag_trace_event> trace;
    constexpr std::size_t n = 45;
    std::vector<std::future<frugal::rag::rag_result>> results(n);
    std::vector<std::atomic<int>> ends(n);
    std::vector<std::stop_source> stops(n);
    {
        frugal::rag::rag_runtime rt(gen, ret, cpu, {.schedule = opt, .max_in_flight = 7});
        rt.set_observer([&](const rag_trace_event& e) { trace.push_back(e); });
        std::vector<std::thread> clients;
        for (std::size_t t = 0; t < 3; ++t)
            clients.emplace_back([&, t] {
                std::mt19937 rng{static_cast<unsigned>(10 + t)};
                for (std::size_t i = t; i < n; i += 3) {
                    frugal::rag::rag_submit_options o{.stop = stops[i].get_token(), .on_done = [&, i](const auto&) { ++ends[i]; }};
                    if (i % 4 == 1) o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(5 + rng() % 40);
                    results[i] = rt.submit(w.pick(i), workflows::state_for(i), std::move(o));
                    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
                    if (i % 3 == 0) {
                        const std::size_t victim = rng() % (i + 1);
                        stops[victim].request_stop();
                    }
                }
            });
        for (auto& c : clients) c.join();
        rt.drain();
        const auto m = rt.metrics();
        EXPECT_EQ(m.finished + m.cancelled + m.timed_out + m.failed, n);
    }
    std::set<std::size_t> in_failed_batches;
    std::map<std::uint64_t, std::vector<std::size_t>> members;
    for (const auto& e : trace) {
        if (e.what == rag_trace_event::kind::generation_batch || e.what == rag_trace_event::kind::retrieval_batch)
            members[e.batch] = e.members;
        if (e.what == rag_trace_event::kind::failed) in_failed_batches.insert(e.members.begin(), e.members.end());
    }
    std::size_t finished = 0, failed = 0;
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(ends[i].load(), 1) << "request " << i << " ended " << ends[i].load() << " times";
        const frugal::rag::rag_result r = results[i].get();
        switch (r.status) {
        case rag_status::finished: {
            ++finished;
            EXPECT_FALSE(in_failed_batches.contains(r.state.request)) << i;
            const auto expect = frugal::rag::testing::walk_alone(w.pick(i), workflows::state_for(i), r.state.request, 128,
                                                                 {.nprobe = 64});
            EXPECT_EQ(r.state.values, expect.values) << "request " << i;
            EXPECT_EQ(r.state.retrieved, expect.retrieved) << "request " << i;
            break;
        }
        case rag_status::failed:
            ++failed;
            EXPECT_TRUE(in_failed_batches.contains(r.state.request)) << i << ": " << r.error;
            EXPECT_TRUE(r.exception != nullptr);
            break;
        case rag_status::cancelled:
            EXPECT_TRUE(stops[i].stop_requested()) << i;
            break;
        case rag_status::timed_out:
            EXPECT_EQ(i % 4, 1u) << i << ": " << r.error;
            break;
        }
        EXPECT_LE(r.metrics.queued_ms, r.metrics.end_to_end_ms + 1e-9);
    }
    EXPECT_GT(finished, 0u);
    EXPECT_GT(failed, 0u);
}

// Estimates that throw, one kind per run: `length` for one request's state, the third
// `step_time` (a batch's sub-stage budget) or the 40th `cluster_time` (one request's
// retrieval budget).
enum class estimate_fault { length, step_time, cluster_time };
class estimate_faults_generator {
public:
    explicit estimate_faults_generator(estimate_fault f) : fault_(f) {}
    double step(std::span<const frugal::rag::generation_slot> batch) { return inner_.step(batch); }
    double step_time(std::size_t b, std::size_t c) const {
        if (fault_ == estimate_fault::step_time && ++step_times_ == 3) throw std::runtime_error("step_time fault");
        return inner_.step_time(b, c);
    }
    std::size_t length(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const {
        if (fault_ == estimate_fault::length && s.input == "question 4") throw std::runtime_error("length fault");
        return inner_.length(s, n);
    }
    void commit(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) { inner_.commit(s, n); }
    void discard(std::size_t r) { inner_.discard(r); }
    void preview(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { inner_.preview(s, n); }

private:
    frugal::sim::simulated_generator inner_;
    estimate_fault fault_;
    mutable int step_times_ = 0;  // the generation side's thread only
};
class estimate_faults_retriever {
public:
    explicit estimate_faults_retriever(estimate_fault f) : fault_(f) {}
    std::uint64_t query_of(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { return inner_.query_of(s, n); }
    std::vector<std::size_t> probe(std::uint64_t q) const { return inner_.probe(q); }
    double cluster_time(std::size_t c) const {
        if (fault_ == estimate_fault::cluster_time && ++cluster_times_ == 40) throw std::runtime_error("cluster_time fault");
        return inner_.cluster_time(c);
    }
    std::size_t list_of(std::uint64_t id) const { return inner_.list_of(id); }
    double search(std::span<const frugal::rag::retrieval_slot<std::uint64_t>> batch) { return inner_.search(batch); }

private:
    frugal::sim::simulated_retriever inner_{frugal::sim::simulated_retriever::config{.nprobe = 64}};
    estimate_fault fault_;
    mutable int cluster_times_ = 0;  // the retrieval side's thread only
};

// Also a fast generator (no hold): the generation side's settled verdicts move requests on
// to retrievals while the retrieval side sleeps, which must be woken (no deadline polls here).
TEST(RagRuntime, AnEstimateThatThrowsFailsOnlyItsRequestOrBatch) {
    const workflows w;
    for (const auto& [fault, message] : {std::pair{estimate_fault::length, "length fault"},
                                        std::pair{estimate_fault::step_time, "step_time fault"},
                                        std::pair{estimate_fault::cluster_time, "cluster_time fault"}}) {
        estimate_faults_generator gen(fault);
        estimate_faults_retriever ret(fault);
        frugal::thread_pool cpu(2);
        constexpr std::size_t n = 12;
        std::vector<std::future<frugal::rag::rag_result>> results;
        {
            frugal::rag::rag_runtime rt(gen, ret, cpu, {.schedule = {.policy = frugal::rag::rag_policy::wavefront}});
            for (std::size_t i = 0; i < n; ++i) results.push_back(rt.submit(w.pick(i), workflows::state_for(i)));
            rt.drain();
        }
        std::size_t failed = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const auto r = results[i].get();
            if (r.status == rag_status::failed) {
                ++failed;
                EXPECT_NE(r.error.find(message), std::string::npos) << i << ": " << r.error;
                if (fault == estimate_fault::length) {
                    EXPECT_EQ(i, 4u);
                }
                continue;
            }
            ASSERT_EQ(r.status, rag_status::finished) << i;
            const auto expect = frugal::rag::testing::walk_alone(w.pick(i), workflows::state_for(i), r.state.request, 128,
                                                                 {.nprobe = 64});
            EXPECT_EQ(r.state.values, expect.values) << "request " << i;
        }
        EXPECT_GE(failed, 1u) << message;
        if (fault != estimate_fault::step_time) {
            EXPECT_EQ(failed, 1u) << message << " fails its request alone";
        }
    }
}

TEST(RagRuntime, TheAdmissionLimitHoldsAndLaterRequestsWait) {
    const workflows w;
    timed_generator gen;
    timed_retriever ret(gen);
    frugal::inline_executor serial;
    std::vector<std::future<frugal::rag::rag_result>> results;
    std::size_t most = 0;
    {
        frugal::rag::rag_runtime rt(gen, ret, serial, {.max_in_flight = 3});
        for (std::size_t i = 0; i < 12; ++i) results.push_back(rt.submit(w.one, workflows::state_for(0)));
        for (int k = 0; k < 200; ++k) {
            const auto m = rt.metrics();
            most = std::max(most, m.in_flight);
            if (m.finished == results.size()) break;
            std::this_thread::sleep_for(1ms);
        }
        rt.drain();
    }
    EXPECT_LE(most, 3u);
    double queued = 0;
    for (auto& f : results) {
        const auto r = f.get();
        EXPECT_EQ(r.status, rag_status::finished);
        queued = std::max(queued, r.metrics.queued_ms);
    }
    EXPECT_GT(queued, 0.0) << "no request waited for admission";
}

TEST(RagRuntime, AStageTimeoutEndsALongStageAndTheDestructorCancelsTheRest) {
    // A generation of ~100 steps of ~0.6 ms (a tenth of the model) against a 5 ms stage limit.
    const workflows w;
    timed_generator gen;
    timed_retriever ret(gen);
    frugal::inline_executor serial;
    std::future<frugal::rag::rag_result> late, left;
    {
        frugal::rag::rag_runtime rt(gen, ret, serial, {.stage_timeout_ms = 5.0});
        late = rt.submit(w.one, workflows::state_for(0));
        EXPECT_EQ(late.wait_for(5s), std::future_status::ready);
    }
    const auto r = late.get();
    EXPECT_EQ(r.status, rag_status::timed_out);
    EXPECT_NE(r.error.find("ran longer than"), std::string::npos) << r.error;
    {
        frugal::rag::rag_runtime rt(gen, ret, serial);
        left = rt.submit(w.multi, workflows::state_for(2));
    }  // destroyed at once
    const auto c = left.get();
    EXPECT_TRUE(c.status == rag_status::cancelled || c.status == rag_status::finished) << rag_status_name(c.status);
}

TEST(RagRuntime, BadInputGetsAClearError) {
    const workflows w;
    timed_generator gen;
    timed_retriever ret(gen);
    frugal::inline_executor serial;
    using frugal::testing::error_of;
    EXPECT_NE(error_of([&] { frugal::rag::rag_runtime rt(gen, ret, serial, {.max_in_flight = 0}); })
                  .find("an admission limit of 0"),
              std::string::npos);
    EXPECT_NE(error_of([&] { frugal::rag::rag_runtime rt(gen, ret, serial, {.stage_timeout_ms = std::nan("")}); })
                  .find("stage timeout nan"),
              std::string::npos);
    frugal::rag::rag_runtime rt(gen, ret, serial);
    EXPECT_NE(error_of([&] {
                  (void)rt.submit(w.one, {}, {.deadline = std::chrono::steady_clock::now() - 1ms});
              }).find("the deadline has already passed"),
              std::string::npos);
    frugal::rag::rag_graph dangling;
    dangling.add_retrieval(0, "r", 2);
    dangling.add_edge(frugal::rag::rag_start, 0);
    dangling.add_edge(0, 9);
    EXPECT_NE(error_of([&] { (void)rt.submit(dangling, {}); }).find("dangling edge 0 (r) -> 9"), std::string::npos);
    // A router that returns a node it did not declare fails its request only.
    frugal::rag::rag_graph rogue;
    rogue.add_retrieval(0, "r", 2);
    rogue.add_edge(frugal::rag::rag_start, 0);
    rogue.add_edge(0, [](const frugal::rag::rag_state&) { return frugal::rag::rag_node_id{42}; }, {frugal::rag::rag_end});
    auto bad = rt.submit(rogue, {});
    auto good = rt.submit(w.one, {});
    const auto b = bad.get();
    EXPECT_EQ(b.status, rag_status::failed);
    EXPECT_NE(b.error.find("chose 42, which is not among its declared targets"), std::string::npos) << b.error;
    EXPECT_EQ(good.get().status, rag_status::finished);
    // The core refuses NaN times and reports of batches it did not hand out.
    frugal::rag::rag_scheduler core(gen, ret);
    EXPECT_NE(error_of([&] { (void)core.submit(w.one, {}, std::nan("")); }).find("time is NaN"), std::string::npos);
    frugal::rag::retrieval_batch<std::uint64_t> stray;
    stray.id = 77;
    EXPECT_NE(error_of([&] { core.retrieval_done(stray, 1.0, 1.0); }).find("batch 77 is not the one in flight"),
              std::string::npos);
}

}  // namespace
