#pragma once
/// @file
/// The executor concept: how frugal runs independent work items on threads the caller
/// owns, `inline_executor`, and `parallel_for` over any executor.

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace frugal {

/// A non-owning reference to a callable `void(std::size_t item, std::size_t worker)`, the
/// work an executor runs. Hand-written because std::function_ref is C++26 and
/// std::function may allocate on every call; the referenced callable must outlive the call.
/// @code
/// auto body = [&](std::size_t item, std::size_t worker) { out[item] = work(item, scratch[worker]); };
/// pool.bulk(n, 2, frugal::bulk_fn(body));
/// @endcode
class bulk_fn {
public:
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, bulk_fn> && std::is_invocable_v<F&, std::size_t, std::size_t>)
    explicit bulk_fn(F& f) noexcept
        : object_(std::addressof(f)), call_([](void* o, std::size_t item, std::size_t worker) {
              (*static_cast<F*>(o))(item, worker);
          }) {}
    void operator()(std::size_t item, std::size_t worker) const { call_(object_, item, worker); }

private:
    void* object_;
    void (*call_)(void*, std::size_t, std::size_t);
};

/// An executor runs a batch of independent items: `e.bulk(count, max_workers, fn)` calls
/// `fn(item, worker)` exactly once for every item in [0, count), on at most `max_workers`
/// threads at once with `worker` < max_workers naming the thread's slot (for per-worker
/// scratch), and returns when every item is done, rethrowing the first exception an item
/// threw (items not yet started are then skipped). `e.concurrency()` is how many workers
/// it can run at once. frugal's parallel algorithms take any executor; by default they
/// use `default_thread_pool()`, a pool kept alive for the process, so no call starts threads.
/// @code
/// static_assert(frugal::executor<frugal::thread_pool>);
/// static_assert(frugal::executor<frugal::inline_executor>);
/// @endcode
template <class E>
concept executor = requires(E& e, std::size_t n, bulk_fn fn) {
    { e.concurrency() } -> std::convertible_to<std::size_t>;
    e.bulk(n, n, fn);
};

/// Runs every item on the calling thread, in index order (worker 0): for callers that do
/// their own threading, and for debugging.
/// @code
/// frugal::inline_executor serial;
/// frugal::parallel_for(serial, n, 4, [&](std::size_t i, std::size_t) { out[i] = f(i); });
/// @endcode
struct inline_executor {
    [[nodiscard]] constexpr std::size_t concurrency() const noexcept { return 1; }
    void bulk(std::size_t count, std::size_t /*max_workers*/, bulk_fn fn) const {
        for (std::size_t i = 0; i < count; ++i) fn(i, 0);
    }
};
static_assert(executor<inline_executor>);

/// Calls `fn(item, worker)` for every item in [0, `count`) on `ex`, with at most
/// `max_workers` workers (worker < max_workers). Each item must write only its own
/// outputs, so results never depend on the executor or the worker count.
/// @code
/// frugal::parallel_for(frugal::default_thread_pool(), heads, 2,
///                      [&](std::size_t h, std::size_t worker) { run_head(h, workspace[worker]); });
/// @endcode
template <executor E, class Fn>
    requires std::is_invocable_v<Fn&, std::size_t, std::size_t>
void parallel_for(E& ex, std::size_t count, std::size_t max_workers, Fn&& fn) {
    if (count == 0) return;
    ex.bulk(count, max_workers == 0 ? 1 : max_workers, bulk_fn(fn));
}

}  // namespace frugal
