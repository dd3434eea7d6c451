#pragma once
/// @file
/// A discrete-event simulator for two resources (compute and I/O) with dependencies:
/// the common yardstick every scheduler in frugal/schedule is scored by.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"

namespace frugal::schedule {

/// The two resources of a schedule: one compute engine and one I/O channel.
enum class resource : std::uint8_t { compute = 0, io = 1 };

/// What the simulator reports: makespan, busy and idle time per resource (idle = makespan
/// minus busy), peak resident bytes, and every task's start and finish time.
struct timeline_result {
    double makespan = 0.0;
    std::array<double, 2> busy{};  ///< indexed by `resource`
    std::array<double, 2> idle{};  ///< indexed by `resource`
    std::uint64_t peak_resident_bytes = 0;
    std::vector<double> start, finish;  ///< indexed by task id

    /// Time `r` spent running tasks.
    [[nodiscard]] double busy_time(resource r) const noexcept { return busy[static_cast<std::size_t>(r)]; }
    /// Makespan minus busy time of `r`.
    [[nodiscard]] double idle_time(resource r) const noexcept { return idle[static_cast<std::size_t>(r)]; }
};

/// A two-resource schedule: tasks with a duration, a resource, dependencies and the bytes
/// they hold. Each resource runs its tasks one at a time in the order they were added; a
/// task starts as soon as its resource has finished the previous one and all its
/// dependencies have finished. A task acquires `acquire_bytes` when it starts and frees
/// `release_bytes` when it finishes (a load acquires, the compute that consumes it
/// releases); `simulate()` replays the events in time order.
/// @code
/// frugal::schedule::timeline t;
/// auto load = t.add(frugal::schedule::resource::io, 2.0, {}, /*acquire*/ 100);
/// t.add(frugal::schedule::resource::compute, 1.0, {load}, 0, /*release*/ 100);
/// auto r = t.simulate();  // r.makespan == 3, r.peak_resident_bytes == 100
/// @endcode
class timeline {
public:
    /// Starts with `initial_resident_bytes` already resident (weights kept from before).
    explicit timeline(std::uint64_t initial_resident_bytes = 0) noexcept : initial_(initial_resident_bytes) {}

    /// Adds a task and returns its id. Dependencies may name any task id, added before or
    /// after; `simulate()` checks they exist and that the schedule can finish.
    std::size_t add(resource on, double duration, std::span<const std::size_t> after = {},
                    std::uint64_t acquire_bytes = 0, std::uint64_t release_bytes = 0) {
        FRUGAL_CHECK(std::isfinite(duration) && duration >= 0.0, "timeline: task ", tasks_.size(),
                     " has duration ", duration, " (must be finite and >= 0)");
        tasks_.push_back({on, duration, acquire_bytes, release_bytes,
                          std::vector<std::size_t>(after.begin(), after.end())});
        return tasks_.size() - 1;
    }
    /// `add` with a braced list of dependencies.
    std::size_t add(resource on, double duration, std::initializer_list<std::size_t> after,
                    std::uint64_t acquire_bytes = 0, std::uint64_t release_bytes = 0) {
        return add(on, duration, std::span<const std::size_t>(after.begin(), after.size()), acquire_bytes,
                   release_bytes);
    }

    /// Adds a dependency `task` -> after `before` to tasks already added.
    void add_dependency(std::size_t task, std::size_t before) {
        FRUGAL_CHECK_AS(frugal::out_of_range, task < tasks_.size(), "timeline: task ", task, " >= ",
                        tasks_.size(), " tasks");
        tasks_[task].after.push_back(before);
    }

    /// The number of tasks added.
    [[nodiscard]] std::size_t size() const noexcept { return tasks_.size(); }

    /// Replays the schedule event by event. Throws `frugal::invalid_argument` when a
    /// dependency names no task, when the per-resource order and the dependencies
    /// deadlock (a cycle), or when a task releases more bytes than are resident.
    [[nodiscard]] timeline_result simulate() const {
        const std::size_t n = tasks_.size();
        timeline_result out;
        out.start.assign(n, 0.0);
        out.finish.assign(n, 0.0);
        // Per resource: its queue in insertion order and the position of its head.
        std::array<std::vector<std::size_t>, 2> queue;
        for (std::size_t i = 0; i < n; ++i) queue[index(tasks_[i].on)].push_back(i);
        std::vector<std::size_t> waiting(n, 0);  // unfinished dependencies per task
        std::vector<std::vector<std::size_t>> dependents(n);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t d : tasks_[i].after) {
                FRUGAL_CHECK_AS(frugal::out_of_range, d < n, "timeline: task ", i, " depends on task ", d,
                                " but only ", n, " tasks exist");
                FRUGAL_CHECK(d != i, "timeline: task ", i, " depends on itself");
                ++waiting[i];
                dependents[d].push_back(i);
            }
        std::array<std::size_t, 2> head{};
        std::array<double, 2> free_at{};
        std::array<bool, 2> running{};
        std::vector<double> ready_at(n, 0.0);  // latest finish among finished dependencies
        // Completion events, earliest first (ties: lower id first, for determinism).
        using event = std::pair<double, std::size_t>;
        std::priority_queue<event, std::vector<event>, std::greater<>> events;
        auto try_start = [&](std::size_t r) {
            if (running[r] || head[r] == queue[r].size()) return;
            const std::size_t t = queue[r][head[r]];
            if (waiting[t] != 0) return;
            const double s = std::max(free_at[r], ready_at[t]);
            out.start[t] = s;
            out.finish[t] = s + tasks_[t].duration;
            running[r] = true;
            events.emplace(out.finish[t], t);
        };
        try_start(0);
        try_start(1);
        std::size_t done = 0;
        while (!events.empty()) {
            const auto [time, t] = events.top();
            events.pop();
            ++done;
            const std::size_t r = index(tasks_[t].on);
            running[r] = false;
            free_at[r] = time;
            ++head[r];
            for (std::size_t d : dependents[t]) {
                --waiting[d];
                ready_at[d] = std::max(ready_at[d], time);
            }
            try_start(0);
            try_start(1);
        }
        FRUGAL_CHECK(done == n, "timeline: deadlock, ", n - done,
                     " tasks can never start (a dependency cycle through the per-resource order)");
        for (std::size_t i = 0; i < n; ++i) {
            out.makespan = std::max(out.makespan, out.finish[i]);
            out.busy[index(tasks_[i].on)] += tasks_[i].duration;
        }
        for (std::size_t r = 0; r < 2; ++r) out.idle[r] = out.makespan - out.busy[r];
        out.peak_resident_bytes = peak_bytes(out);
        return out;
    }

private:
    struct task {
        resource on;
        double duration;
        std::uint64_t acquire, release;
        std::vector<std::size_t> after;
    };

    static constexpr std::size_t index(resource r) noexcept { return static_cast<std::size_t>(r); }

    // Sweeps start (acquire) and finish (release) events in time order; at equal times
    // releases come first, so back-to-back reuse of memory does not count twice.
    [[nodiscard]] std::uint64_t peak_bytes(const timeline_result& r) const {
        struct mem_event {
            double time;
            bool acquire;
            std::size_t task;
        };
        std::vector<mem_event> ev;
        for (std::size_t i = 0; i < tasks_.size(); ++i) {
            if (tasks_[i].acquire != 0) ev.push_back({r.start[i], true, i});
            if (tasks_[i].release != 0) ev.push_back({r.finish[i], false, i});
        }
        std::sort(ev.begin(), ev.end(), [](const mem_event& a, const mem_event& b) {
            if (a.time != b.time) return a.time < b.time;
            return !a.acquire && b.acquire;
        });
        std::uint64_t resident = initial_, peak = initial_;
        for (const auto& e : ev) {
            if (e.acquire) {
                resident = checked_add(resident, tasks_[e.task].acquire, "timeline: resident bytes");
                peak = std::max(peak, resident);
            } else {
                FRUGAL_CHECK(tasks_[e.task].release <= resident, "timeline: task ", e.task, " releases ",
                             tasks_[e.task].release, " bytes but only ", resident, " are resident");
                resident -= tasks_[e.task].release;
            }
        }
        return peak;
    }

    std::uint64_t initial_;
    std::vector<task> tasks_;
};

}  // namespace frugal::schedule
