#pragma once
// Brute-force models of S3-FIFO, SIEVE, ARC, LIRS, 2Q and LRU behind a cache with the semantics of
// frugal::cache::basic_cache (weights, pins, replacement, erase, refusals and the eviction log),
// written from the papers' descriptions with plain vectors and linear scans; S3-FIFO's and LIRS's
// decisions are libCacheSim's (S3FIFOv0.c / S3FIFO.c and LIRS.c at their default parameters), with
// LIRS's evictions during a hit deferred to the next insertion that needs room, as the
// implementation states. In front of LRU, SIEVE and S3-FIFO, TinyLFU admission with exact counts
// (a map of counts by key, halved every 32 x capacity recorded accesses): a new key that needs room
// enters only when counted strictly more often than the policy's victim. Shared by the unit tests
// and the fuzz target.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <frugal/cache/basic_cache.hpp>

namespace frugal::cache_model {

using frugal::cache::eviction_reason;
using frugal::cache::put_result;

enum class kind { s3fifo, s3fifo_warm_main, sieve, arc, lirs, two_queue, lru };
/// What stands in front of the policy: nothing, or TinyLFU admission with exact counts (for
/// the kinds lru, sieve, s3fifo and s3fifo_warm_main).
enum class admission { none, tinylfu };

class model {
public:
    model(kind k, std::size_t capacity, admission a = admission::none) : kind_(k), admission_(a), capacity_(capacity) {
        set_limits();
    }
    std::vector<std::pair<int, eviction_reason>> log;

    bool pinned(int key) const { return entries_.count(key) != 0 && entries_.at(key).pins > 0; }
    bool contains(int key) const { return entries_.count(key) != 0; }
    std::size_t total() const {
        std::size_t t = 0;
        for (auto& [k, e] : entries_) t += e.weight;
        return t;
    }
    std::vector<int> keys() const {
        std::vector<int> k;
        for (auto& [key, e] : entries_) k.push_back(key);
        return k;
    }

    bool get(int key) {
        auto it = entries_.find(key);
        if (it == entries_.end()) return false;
        if (it->second.pins == 0) touch(key);
        return true;
    }
    put_result put(int key, std::size_t w, double /*cost*/ = 1.0) {
        std::size_t pinned_total = 0;
        for (auto& [k, e] : entries_)
            if (e.pins > 0) pinned_total += e.weight;
        if (entries_.count(key) != 0) {
            detach(key);
            log.emplace_back(key, eviction_reason::replaced);
            if (pinned_total + w > capacity_) {
                entries_.erase(key);
                forget(key);
                log.emplace_back(key, eviction_reason::rejected);
                return put_result::rejected;
            }
            entries_.at(key).weight = 0;  // out of the total and out of reach of the evictions below
            entries_.at(key).pins = 1;
            make_room(w, key);
            entries_.at(key).pins = 0;
            entries_.at(key).weight = w;
            replace(key);
            return put_result::replaced;
        }
        if (pinned_total + w > capacity_) {
            log.emplace_back(key, eviction_reason::rejected);
            return put_result::rejected;
        }
        if (admission_ == admission::tinylfu) {  // every key offered is counted
            record(key);
            const std::optional<int> v = total() + w > capacity_ ? victim() : std::nullopt;
            if (v && counts_[key] <= counts_[*v]) {
                log.emplace_back(key, eviction_reason::rejected);
                return put_result::rejected;
            }
        }
        expect(key, w);
        make_room(w, key);
        entries_[key] = entry{w};
        admit(key);
        return put_result::inserted;
    }
    bool erase(int key) {
        if (entries_.count(key) == 0) return false;
        detach(key);
        entries_.erase(key);
        forget(key);
        log.emplace_back(key, eviction_reason::erased);
        return true;
    }
    bool pin(int key) {
        if (!get(key)) return false;
        if (entries_.at(key).pins++ == 0) detach(key);
        return true;
    }
    void unpin(int key) {
        if (--entries_.at(key).pins == 0) {
            reattach(key);
            make_room(0, key);
        }
    }

private:
    struct entry {
        std::size_t weight = 1;
        std::uint32_t pins = 0;
        int freq = 0;            // S3-FIFO counter
        bool second = false;     // S3-FIFO main, ARC T2, 2Q Am, SIEVE visited, LIRS LIR
    };
    struct ghost {
        int key;
        std::size_t weight;
    };
    // A LIRS stack record: resident LIR, resident HIR or non-resident HIR, with the weight
    // its entry had when the record went to S's top.
    struct srec {
        int key;
        enum { lir, hir, nonres } status;
        std::size_t weight = 0;
    };

    std::size_t w(int key) const { return entries_.at(key).weight; }
    static std::size_t weight_of(const std::vector<int>& q, const std::map<int, entry>& es) {
        std::size_t t = 0;
        for (int k : q) t += es.at(k).weight;
        return t;
    }
    static std::size_t weight_of(const std::deque<ghost>& g) {
        std::size_t t = 0;
        for (auto& x : g) t += x.weight;
        return t;
    }
    static void drop(std::vector<int>& q, int key) { q.erase(std::find(q.begin(), q.end(), key)); }
    static bool take_ghost(std::deque<ghost>& g, int key) {
        auto it = std::find_if(g.begin(), g.end(), [&](const ghost& x) { return x.key == key; });
        if (it == g.end()) return false;
        g.erase(it);
        return true;
    }

    void set_limits() {
        const double c = static_cast<double>(capacity_);
        small_max_ = static_cast<std::size_t>(c * 0.1);
        ghost_max_ = static_cast<std::size_t>(c * 0.9);
        kin_ = static_cast<std::size_t>(c * 0.25);
        kout_ = static_cast<std::size_t>(c * 0.5);
        const auto hir = std::max<std::size_t>(1, static_cast<std::size_t>(c * 0.01));
        lir_max_ = capacity_ > hir ? capacity_ - hir : 0;
    }

    // Evicts policy victims until `extra` more weight fits (entries with pins never go).
    void make_room(std::size_t extra, int newcomer) {
        (void)newcomer;
        while (total() + extra > capacity_) {
            const std::optional<int> v = evict_one(extra);
            if (!v) break;
            entries_.erase(*v);
            log.emplace_back(*v, eviction_reason::capacity);
        }
    }

    // ---- TinyLFU admission ---------------------------------------------------------------
    void record(int key) {
        ++counts_[key];
        if (++records_ >= 32 * static_cast<std::uint64_t>(capacity_)) {
            records_ = 0;
            for (auto& [k, c] : counts_) c /= 2;
        }
    }

    // ---- the policies -------------------------------------------------------------------
    void expect(int key, std::size_t weight) {
        pending_key_ = key;
        incoming_ = weight;
        first_eviction_ = true;
        pending_ = none;
        switch (kind_) {
            case kind::s3fifo:
            case kind::s3fifo_warm_main:
                if (take_ghost(ghost_, key)) pending_ = ghost_hit;
                break;
            case kind::two_queue:
                if (take_ghost(ghost_, key)) pending_ = ghost_hit;
                break;
            case kind::arc: {
                const double b1 = static_cast<double>(weight_of(b1_)), b2 = static_cast<double>(weight_of(b2_));
                const double wd = static_cast<double>(weight == 0 ? 1 : weight);
                if (take_ghost(b1_, key)) {
                    pending_ = in_b1;
                    p_ = std::min(p_ + wd * std::max(1.0, b1 > 0 ? b2 / b1 : 1.0), static_cast<double>(capacity_));
                } else if (take_ghost(b2_, key)) {
                    pending_ = in_b2;
                    p_ = std::max(p_ - wd * std::max(1.0, b2 > 0 ? b1 / b2 : 1.0), 0.0);
                }
                break;
            }
            case kind::lirs: {
                auto it = find_s(key);
                if (it != s_.end() && it->status == srec::nonres) {  // to S's top; the LIR set makes room
                    pending_ = ghost_hit;
                    const srec r = *it;
                    s_.erase(it);
                    s_.push_back(r);
                    drop(nh_, key);
                    while (lir_weight() + weight > lir_max_ && demote_bottom()) {
                    }
                }
                break;
            }
            case kind::sieve:
            case kind::lru: break;
        }
    }
    void admit(int key) {
        chosen_.reset();
        entry& e = entries_.at(key);
        const bool hit = pending_key_ == key && pending_ != none;
        pending_ = none;
        incoming_ = 0;
        switch (kind_) {
            case kind::s3fifo:
            case kind::s3fifo_warm_main:
                e.freq = 0;
                e.second = hit || (kind_ == kind::s3fifo_warm_main && !has_evicted_ && weight_of(small_, entries_) >= small_max_);
                (e.second ? main_ : small_).push_back(key);
                break;
            case kind::sieve:
            case kind::lru:
                e.second = false;
                small_.push_back(key);
                break;
            case kind::arc:
                e.second = hit;
                (e.second ? main_ : small_).push_back(key);
                break;
            case kind::two_queue:
                e.second = hit;
                (e.second ? main_ : small_).push_back(key);
                break;
            case kind::lirs: {
                auto it = find_s(key);
                if (hit && it != s_.end()) {  // the ghost's record, at S's top
                    e.second = true;
                    *it = {key, srec::lir, e.weight};
                } else {
                    e.second = lir_weight() + e.weight <= lir_max_;
                    s_.push_back({key, e.second ? srec::lir : srec::hir, e.weight});
                    if (!e.second) small_.push_back(key);
                }
                limit_stack();
                break;
            }
        }
    }
    void touch(int key) {
        chosen_.reset();
        if (admission_ == admission::tinylfu) record(key);
        entry& e = entries_.at(key);
        switch (kind_) {
            case kind::s3fifo:
            case kind::s3fifo_warm_main: e.freq = std::min(e.freq + 1, 3); break;
            case kind::sieve: e.second = true; break;
            case kind::lru:
                drop(small_, key);
                small_.push_back(key);
                break;
            case kind::arc:
                if (e.second) {
                    drop(main_, key);
                } else {
                    drop(small_, key);
                    e.second = true;
                }
                main_.push_back(key);
                break;
            case kind::two_queue:
                if (e.second) {
                    drop(main_, key);
                    main_.push_back(key);
                }
                break;
            case kind::lirs: {
                auto it = find_s(key);
                if (e.second) {  // LIR: to the top of S, prune
                    const srec r = *it;
                    s_.erase(it);
                    s_.push_back(r);
                    prune();
                } else if (it != s_.end()) {  // HIR in S: to S's top, out of Q, room made, LIR
                    const srec r = *it;
                    s_.erase(it);
                    s_.push_back(r);
                    drop(small_, key);
                    while (lir_weight() + e.weight > lir_max_ && demote_bottom()) {
                    }
                    s_.back().status = srec::lir;
                    e.second = true;
                } else {  // HIR out of S: Q's end, the bottom LIR entries to Q (libCacheSim), S's top
                    drop(small_, key);
                    small_.push_back(key);
                    while (lir_weight() + e.weight > lir_max_ && demote_bottom()) {
                    }
                    s_.push_back({key, srec::hir, e.weight});
                }
                limit_stack();
                break;
            }
        }
    }
    // Out of the policy's view (pinned, replaced, erased).
    void detach(int key) {
        chosen_.reset();
        entry& e = entries_.at(key);
        switch (kind_) {
            case kind::lirs: {
                auto it = find_s(key);
                if (it != s_.end()) s_.erase(it);
                if (e.second) {
                    prune();
                } else {
                    drop(small_, key);
                }
                break;
            }
            case kind::sieve:
                if (hand_ && *hand_ == key) hand_ = after(small_, key);
                drop(small_, key);
                break;
            default: drop(e.second ? main_ : small_, key); break;
        }
    }
    void reattach(int key) {
        chosen_.reset();
        entry& e = entries_.at(key);
        if (kind_ == kind::lirs) {
            s_.push_back({key, e.second ? srec::lir : srec::hir, e.weight});
            if (e.second) {
                while (lir_weight() > lir_max_ && demote_bottom()) {
                }
            } else {
                small_.push_back(key);
            }
            return;
        }
        (e.second && kind_ != kind::sieve ? main_ : small_).push_back(key);
    }
    void replace(int key) {
        reattach(key);
        touch(key);
    }
    void forget(int /*key*/) {}

    // One eviction: the key that leaves (its ghost recorded), or nullopt.
    std::optional<int> evict_one(std::size_t extra) {
        (void)extra;
        switch (kind_) {
            case kind::s3fifo:
            case kind::s3fifo_warm_main: return s3fifo_evict();
            case kind::sieve: return sieve_evict();
            case kind::arc: return arc_evict();
            case kind::lirs: return lirs_evict();
            case kind::two_queue: return two_queue_evict();
            case kind::lru: {
                if (small_.empty()) return std::nullopt;
                const int v = small_.front();
                small_.erase(small_.begin());
                return v;
            }
        }
        return std::nullopt;
    }
    // The entry the next eviction takes, after the moves its search makes (TinyLFU compares the
    // newcomer with it); asked again with nothing changed in between, the same entry.
    std::optional<int> victim() {
        switch (kind_) {
            case kind::lru: return small_.empty() ? std::nullopt : std::optional<int>(small_.front());
            case kind::sieve: return sieve_hand();
            case kind::s3fifo:
            case kind::s3fifo_warm_main:
                if (!chosen_) chosen_ = s3fifo_find();
                return chosen_;
            default: break;
        }
        return std::nullopt;  // not modelled with admission
    }

    // libCacheSim's S3FIFO.c / S3FIFOv0.c: the queue is chosen once per eviction; from the
    // small queue, hit entries move to the main queue until an unhit one is found (when none
    // is, the small queue is empty and the main queue is evicted from). The victim stays at
    // the front of its queue; the eviction takes the one chosen (by a TinyLFU comparison) if any.
    std::optional<int> s3fifo_find() {
        if (weight_of(main_, entries_) <= capacity_ - small_max_ && !small_.empty()) {
            while (!small_.empty()) {
                const int s = small_.front();
                entry& e = entries_.at(s);
                if (e.freq < 2) return s;
                small_.erase(small_.begin());
                e.freq = 0;
                e.second = true;
                main_.push_back(s);
            }
        }
        while (!main_.empty()) {
            const int m = main_.front();
            entry& e = entries_.at(m);
            if (e.freq == 0) return m;
            main_.erase(main_.begin());
            e.freq -= 1;
            main_.push_back(m);
        }
        return std::nullopt;
    }
    std::optional<int> s3fifo_evict() {
        const std::optional<int> v = chosen_ ? chosen_ : s3fifo_find();
        chosen_.reset();
        if (!v) return std::nullopt;
        const entry& e = entries_.at(*v);
        drop(e.second ? main_ : small_, *v);
        if (!e.second && e.weight <= ghost_max_) {
            while (weight_of(ghost_) + e.weight > ghost_max_) ghost_.pop_front();
            ghost_.push_back({*v, e.weight});
        }
        has_evicted_ = true;
        return v;
    }

    static std::optional<int> after(const std::vector<int>& q, int key) {
        auto it = std::find(q.begin(), q.end(), key);
        if (it == q.end() || std::next(it) == q.end()) return std::nullopt;
        return *std::next(it);
    }
    // The hand moves to the first unvisited entry, clearing the bits it passes, and stops there.
    std::optional<int> sieve_hand() {
        if (small_.empty()) return std::nullopt;
        int p = hand_ ? *hand_ : small_.front();
        while (entries_.at(p).second) {
            entries_.at(p).second = false;
            const auto n = after(small_, p);
            p = n ? *n : small_.front();
        }
        hand_ = p;
        return p;
    }
    std::optional<int> sieve_evict() {
        const std::optional<int> p = sieve_hand();
        if (!p) return std::nullopt;
        hand_ = after(small_, *p);
        drop(small_, *p);
        return p;
    }

    // ARC, Fig. 4: small_ = T1, main_ = T2 (least recent first), b1_/b2_ the ghosts.
    std::optional<int> arc_evict() {
        if (small_.empty() && main_.empty()) return std::nullopt;
        const std::size_t t1 = weight_of(small_, entries_), t2 = weight_of(main_, entries_);
        const std::size_t b1 = weight_of(b1_), b2 = weight_of(b2_);
        bool to_ghost = true;
        const bool ghost_first = first_eviction_ && (pending_ == in_b1 || pending_ == in_b2);
        first_eviction_ = false;
        if (!ghost_first) {
            if (t1 + b1 + incoming_ > capacity_) {  // case IV.A
                if (t1 >= capacity_) {
                    to_ghost = false;
                } else if (!b1_.empty()) {
                    b1_.pop_front();
                }
            } else if (t1 + t2 + b1 + b2 >= 2 * capacity_ && !b2_.empty()) {  // case IV.B
                b2_.pop_front();
            }
        }
        // REPLACE
        const double t1d = static_cast<double>(t1);
        const bool from_t1 = !small_.empty() && (t1d > p_ || (pending_ == in_b2 && t1d == p_) || main_.empty() || !to_ghost);
        std::vector<int>& list = from_t1 ? small_ : main_;
        const int v = list.front();
        list.erase(list.begin());
        if (to_ghost) {
            (from_t1 ? b1_ : b2_).push_back({v, w(v)});
            while (weight_of(small_, entries_) + weight_of(b1_) > capacity_ && !b1_.empty()) b1_.pop_front();
            while (weight_of(small_, entries_) + weight_of(main_, entries_) + weight_of(b1_) + weight_of(b2_) > 2 * capacity_ &&
                   !(b1_.empty() && b2_.empty()))
                (b2_.empty() ? b1_ : b2_).pop_front();
        }
        return v;
    }

    // LIRS with an explicit stack S (s_, bottom first), Q = small_ (resident HIR, oldest first,
    // over its share after a hit until the next insertion that needs room) and the ghosts in
    // the order they were made (nh_, libCacheSim's LRU_nh).
    std::vector<srec>::iterator find_s(int key) {
        return std::find_if(s_.begin(), s_.end(), [&](const srec& r) { return r.key == key; });
    }
    std::size_t lir_weight() const {
        std::size_t t = 0;
        for (auto& r : s_)
            if (r.status == srec::lir) t += entries_.at(r.key).weight;
        return t;
    }
    // Stack pruning: HIR records leave the bottom until an LIR one is there; the top one stays.
    void prune() {
        while (s_.size() > 1 && s_.front().status != srec::lir) {
            if (s_.front().status == srec::nonres) drop(nh_, s_.front().key);
            s_.erase(s_.begin());
        }
    }
    // The bottom LIR entry to Q's end, out of S; false when there is none.
    bool demote_bottom() {
        prune();
        if (s_.empty() || s_.front().status != srec::lir) return false;
        const int b = s_.front().key;
        s_.erase(s_.begin());
        entries_.at(b).second = false;
        small_.push_back(b);
        prune();
        return true;
    }
    // S within twice the capacity: the oldest ghosts leave.
    void limit_stack() {
        for (;;) {
            std::size_t t = 0;
            for (auto& r : s_) t += r.weight;
            if (t <= 2 * capacity_ || nh_.empty()) return;
            s_.erase(find_s(nh_.front()));
            nh_.erase(nh_.begin());
        }
    }
    std::optional<int> lirs_evict() {
        if (small_.empty()) {  // no resident HIR: the bottom LIR entry
            prune();
            if (s_.empty() || s_.front().status != srec::lir) return std::nullopt;
            const int k = s_.front().key;
            s_.erase(s_.begin());
            prune();
            return k;
        }
        const int v = small_.front();
        small_.erase(small_.begin());
        auto it = find_s(v);
        if (it != s_.end()) {  // stays in S as a non-resident ghost
            it->status = srec::nonres;
            nh_.push_back(v);
        }
        return v;
    }

    std::optional<int> two_queue_evict() {
        if (!small_.empty() && (weight_of(small_, entries_) > kin_ || main_.empty())) {
            const int v = small_.front();
            small_.erase(small_.begin());
            if (w(v) <= kout_) {
                while (weight_of(ghost_) + w(v) > kout_) ghost_.pop_front();
                ghost_.push_back({v, w(v)});
            }
            return v;
        }
        if (main_.empty()) return std::nullopt;
        const int v = main_.front();
        main_.erase(main_.begin());
        return v;
    }

    enum pending_kind { none, ghost_hit, in_b1, in_b2 };
    kind kind_;
    admission admission_;
    std::size_t capacity_;
    std::size_t small_max_ = 0, ghost_max_ = 0, kin_ = 0, kout_ = 0, lir_max_ = 0, incoming_ = 0;
    std::map<int, entry> entries_;
    std::vector<int> small_, main_;  // the two queues (oldest first) of each policy
    std::deque<ghost> ghost_, b1_, b2_;
    std::vector<srec> s_;
    std::vector<int> nh_;
    std::optional<int> hand_;
    std::optional<int> chosen_;          // S3-FIFO's victim, named and not yet evicted
    std::map<int, unsigned> counts_;     // TinyLFU: accesses by key
    std::uint64_t records_ = 0;          // TinyLFU: recorded accesses since the last halving
    double p_ = 0;
    int pending_key_ = 0;
    pending_kind pending_ = none;
    bool has_evicted_ = false, first_eviction_ = false;
};

}  // namespace frugal::cache_model
