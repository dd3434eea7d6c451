#pragma once
/// @file
/// admitted_policy: an admission filter (`admission_policy`) in front of any replacement
/// policy (`cache_policy`).

#include <concepts>
#include <cstddef>
#include <utility>

#include "frugal/cache/admission_policy.hpp"
#include "frugal/cache/cache_policy.hpp"

namespace frugal::cache {

/// `Policy` behind the admission filter `Admission`, as libCacheSim puts an admissioner in
/// front of any eviction algorithm. A new key that fits the cache without evicting enters as
/// under `Policy` alone; one that needs room enters only when `Admission::admit(its hash, the
/// victim's hash)` holds for the entry `Policy` would evict first (`victim()`), and is
/// otherwise refused: `put` returns `put_result::rejected`, the callback sees reason
/// `rejected`, nothing is evicted and `Policy` never hears of the key (only its `victim()` was
/// asked: moves it makes while searching, SIEVE's hand or S3-FIFO's promotions, stand, as in
/// an eviction that evicted nothing). The admission records every access the cache reports:
/// each hit (a pinned entry's hits are not reported), each replaced value and each new key
/// offered, admitted or not, that fits beside the pinned entries. An admitted key is weighed
/// against the first victim only, even when it needs more than one eviction. The victim is
/// asked before `Policy` hears of the key (`expect`), so a refused key leaves no trace in its
/// ghosts; for an admitted one, a policy that reacts to a returning ghost (ARC, LIRS) may
/// then evict another entry first, and LIRS's victim search may have pruned the key's ghost
/// from the bottom of its stack. With `admit_all` no victim is asked: the decisions are
/// exactly `Policy`'s. Extra constructor arguments go to `Policy`'s state.
/// @code
/// namespace fc = frugal::cache;
/// using tinylfu_sieve = fc::admitted_policy<fc::tinylfu_admission<>, fc::sieve_policy>;
/// fc::basic_cache<std::uint64_t, block, tinylfu_sieve> c(1000);
/// if (c.put(key, load(key)) == fc::put_result::rejected) serve_uncached(key);
/// @endcode
template <admission_policy Admission, cache_policy Policy>
struct admitted_policy {
    using node_data = typename Policy::node_data;
    template <class Node>
    class state {
        using policy_state = typename Policy::template state<Node>;

    public:
        template <class... PolicyArgs>
        explicit state(std::size_t capacity, PolicyArgs&&... policy_args)
            : admission_(capacity), policy_(capacity, std::forward<PolicyArgs>(policy_args)...) {}

        /// Records the key's access; when room must be made, asks the admission about it
        /// against the policy's victim.
        [[nodiscard]] bool accepts(std::size_t hash, std::size_t /*weight*/, bool needs_room) {
            admission_.record(hash);
            if (std::same_as<Admission, admit_all> || !needs_room) return true;
            Node* v = policy_.victim();
            return v == nullptr || admission_.admit(hash, v->hash);
        }
        void expect(std::size_t hash, std::size_t weight)
            requires expects_newcomers<policy_state>
        {
            policy_.expect(hash, weight);
        }
        void admit(Node& n, double cost) {
            policy_.admit(n, cost);
            admission_.hold(++entries_);
        }
        void touch(Node& n) {
            admission_.record(n.hash);
            policy_.touch(n);
        }
        void remove(Node& n) noexcept {
            policy_.remove(n);
            --entries_;
        }
        void reattach(Node& n) {
            policy_.reattach(n);
            admission_.hold(++entries_);
        }
        void replace(Node& n, double cost) {
            admission_.record(n.hash);
            policy_.replace(n, cost);
            admission_.hold(++entries_);
        }
        [[nodiscard]] Node* victim() { return policy_.victim(); }
        void evict(Node& n) {
            policy_.evict(n);
            --entries_;
        }
        void set_capacity(std::size_t capacity) {
            admission_.set_capacity(capacity);
            policy_.set_capacity(capacity);
        }
        [[nodiscard]] const Admission& admission() const noexcept { return admission_; }
        /// The replacement policy's state.
        [[nodiscard]] const policy_state& inner() const noexcept { return policy_; }

    private:
        Admission admission_;
        policy_state policy_;
        std::size_t entries_ = 0;  // held by the policy (unpinned), for `Admission::hold`
    };
};

}  // namespace frugal::cache
