"""Pure-Python models of SIEVE, S3-FIFO, ARC, 2Q and LIRS, written from their papers (S3-FIFO's
and LIRS's decisions as libCacheSim's S3FIFO.c and LIRS.c make them) with lists and linear
scans, for unit weights and a workload of gets and puts of absent keys (a miss then its
insertion), where the papers and frugal's weighted policies must agree.

Each model has get(key) -> hit (the access recorded), put(key) -> the keys evicted to make
room, in order, and keys() -> the resident keys. Where a paper leaves a choice open, the
model takes the one frugal's cache_policy contract states: a newcomer's ghost is looked up
before the evictions made for it (cache_policy's expect()), and eviction starts only when
the cache is full."""


class SieveModel:
    """SIEVE (NSDI 2024): a FIFO of entries, newest at the head; a hit sets the entry's
    visited bit; the hand walks from the tail (oldest) toward the head, clearing set bits,
    evicts the first unvisited entry and stays at its newer neighbour, wrapping to the tail
    past the head."""

    def __init__(self, capacity):
        self.capacity, self.queue, self.visited, self.hand = capacity, [], {}, None

    def keys(self):
        return self.queue

    def get(self, k):
        if k not in self.visited:
            return False
        self.visited[k] = True
        return True

    def put(self, k):
        evicted = []
        if len(self.queue) == self.capacity:
            i = self.queue.index(self.hand) if self.hand is not None else 0
            while self.visited[self.queue[i]]:
                self.visited[self.queue[i]] = False
                i = (i + 1) % len(self.queue)
            victim = self.queue.pop(i)
            del self.visited[victim]
            self.hand = self.queue[i] if i < len(self.queue) else None
            evicted.append(victim)
        self.queue.append(k)
        self.visited[k] = False
        return evicted


class S3FIFOModel:
    """S3-FIFO (SOSP 2023): small FIFO S (10% of the capacity), main FIFO M, ghost FIFO G
    (90%). A hit adds one to a counter capped at 3. A new key enters M if it is in G, else S.
    When full, the queue is chosen once per eviction, as libCacheSim's S3FIFO.c does: if M
    holds more than its 90% share (or S is empty), M's oldest is reinserted with its counter
    minus one while nonzero, and the first with a zero counter is evicted; otherwise S's
    oldest moves to M (counter reset) while it was hit at least twice, even past M's share,
    and the first one hit fewer times is evicted into G."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.small_max, self.ghost_max = int(capacity * 0.1), int(capacity * 0.9)
        self.small, self.main, self.ghost, self.freq = [], [], [], {}

    def keys(self):
        return self.small + self.main

    def get(self, k):
        if k not in self.freq:
            return False
        self.freq[k] = min(self.freq[k] + 1, 3)
        return True

    def put(self, k):
        from_ghost = k in self.ghost
        if from_ghost:
            self.ghost.remove(k)
        evicted = []
        if len(self.small) + len(self.main) == self.capacity:
            evicted.append(self._evict())
        self.freq[k] = 0
        (self.main if from_ghost else self.small).append(k)
        return evicted

    def _evict(self):
        # libCacheSim's S3FIFO.c: the queue is chosen once per eviction.
        if len(self.main) <= self.capacity - self.small_max and self.small:
            while self.small:
                s = self.small.pop(0)
                if self.freq[s] >= 2:
                    self.freq[s] = 0
                    self.main.append(s)
                    continue
                del self.freq[s]
                self.ghost.append(s)
                if len(self.ghost) > self.ghost_max:
                    self.ghost.pop(0)
                return s
        while True:
            m = self.main.pop(0)
            if self.freq[m] > 0:
                self.freq[m] -= 1
                self.main.append(m)
                continue
            del self.freq[m]
            return m


class ARCModel:
    """ARC, Fig. 4 of the FAST 2003 paper: T1/T2 resident (least recent first), B1/B2 their
    ghosts, p the target size of T1. Where REPLACE would take from an empty T2 (the paper
    leaves it open), T1's least recent goes."""

    def __init__(self, capacity):
        self.c, self.p = capacity, 0.0
        self.t1, self.t2, self.b1, self.b2 = [], [], [], []

    def keys(self):
        return self.t1 + self.t2

    def get(self, k):
        if k in self.t1:
            self.t1.remove(k)
        elif k in self.t2:
            self.t2.remove(k)
        else:
            return False
        self.t2.append(k)  # case I
        return True

    def _replace(self, in_b2):
        if self.t1 and (len(self.t1) > self.p or (in_b2 and len(self.t1) == self.p) or not self.t2):
            v = self.t1.pop(0)
            self.b1.append(v)
        else:
            v = self.t2.pop(0)
            self.b2.append(v)
        return v

    def put(self, k):
        c = self.c
        if k in self.b1:  # case II
            self.p = min(c, self.p + max(1.0, len(self.b2) / len(self.b1)))
            self.b1.remove(k)
            evicted = [self._replace(False)]
            self.t2.append(k)
            return evicted
        if k in self.b2:  # case III
            self.p = max(0.0, self.p - max(1.0, len(self.b1) / len(self.b2)))
            self.b2.remove(k)
            evicted = [self._replace(True)]
            self.t2.append(k)
            return evicted
        evicted = []  # case IV
        if len(self.t1) + len(self.b1) == c:
            if len(self.t1) < c:
                self.b1.pop(0)
                evicted.append(self._replace(False))
            else:
                evicted.append(self.t1.pop(0))  # no ghost
        elif len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) >= c:
            if len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) == 2 * c:
                self.b2.pop(0)
            evicted.append(self._replace(False))
        self.t1.append(k)
        return evicted


class TwoQueueModel:
    """2Q, the full version (VLDB 1994): A1in FIFO (Kin = 25%), A1out ghost FIFO (Kout = 50%),
    Am LRU. A hit in Am makes it most recent, a hit in A1in changes nothing; a miss in A1out
    enters Am, any other miss A1in. reclaimfor: A1in's oldest into A1out while A1in is over
    Kin (or Am is empty), else Am's least recent."""

    def __init__(self, capacity):
        self.capacity, self.kin, self.kout = capacity, int(capacity * 0.25), int(capacity * 0.5)
        self.a1in, self.a1out, self.am = [], [], []

    def keys(self):
        return self.a1in + self.am

    def get(self, k):
        if k in self.am:
            self.am.remove(k)
            self.am.append(k)
            return True
        return k in self.a1in

    def put(self, k):
        from_ghost = k in self.a1out
        if from_ghost:
            self.a1out.remove(k)
        evicted = []
        if len(self.a1in) + len(self.am) == self.capacity:
            if self.a1in and (len(self.a1in) > self.kin or not self.am):
                v = self.a1in.pop(0)
                self.a1out.append(v)
                if len(self.a1out) > self.kout:
                    self.a1out.pop(0)
            else:
                v = self.am.pop(0)
            evicted.append(v)
        (self.am if from_ghost else self.a1in).append(k)
        return evicted


class LIRSModel:
    """LIRS (SIGMETRICS 2002) with the decisions of libCacheSim's LIRS.c at its defaults: the
    stack S kept explicitly (bottom first), the queue Q of resident HIR entries (front: next
    victim) and the ghosts in the order they were made (libCacheSim's LRU_nh). LIR entries
    hold capacity - Lhirs slots (Lhirs = 1% of the capacity, at least 1); a new entry is LIR
    while they have room. Pruning removes HIR records from S's bottom (never S's top one).
    Making room in the LIR set moves S's bottom LIR entry to Q's end. A ghost asked for again
    goes to S's top and the LIR set makes room for it before the eviction; a resident HIR
    entry hit in S becomes LIR; one hit out of S goes to Q's end, the LIR set makes room (the
    paper does not; libCacheSim does), and it goes to S's top. S holds at most twice the
    capacity; the oldest ghosts leave first, after each access. Where libCacheSim evicts from
    Q during a hit, Q grows past its share instead and its oldest entry leaves at the next
    insertion (frugal never evicts on a hit): so an insertion into a full cache evicts Q's
    oldest entry, or S's bottom LIR entry when Q is empty."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.lhirs = max(1, int(capacity * 0.01))
        self.lir_max = capacity - self.lhirs
        self.s, self.q, self.nh = [], [], []
        self.lir, self.resident, self.nonres = set(), set(), set()

    def _prune(self):
        while len(self.s) > 1 and self.s[0] not in self.lir:
            x = self.s.pop(0)
            if x in self.nonres:
                self.nonres.remove(x)
                self.nh.remove(x)

    def _demote_bottom(self):
        self._prune()
        if not self.s or self.s[0] not in self.lir:
            return False
        bottom = self.s.pop(0)
        self.lir.remove(bottom)
        self.q.append(bottom)
        self._prune()
        return True

    def _room_in_lir(self):
        while len(self.lir) + 1 > self.lir_max and self._demote_bottom():
            pass

    def _limit_stack(self):
        while len(self.s) > 2 * self.capacity and self.nh:
            g = self.nh.pop(0)
            self.s.remove(g)
            self.nonres.remove(g)

    def _to_top(self, k):
        self.s.remove(k)
        self.s.append(k)

    def keys(self):
        return list(self.resident)

    def get(self, k):
        if k not in self.resident:
            return False
        if k in self.lir:
            self._to_top(k)
            self._prune()
        elif k in self.s:  # HIR in S: becomes LIR
            self._to_top(k)
            self.q.remove(k)
            self._room_in_lir()
            self.lir.add(k)
        else:  # HIR out of S
            self.q.remove(k)
            self.q.append(k)
            self._room_in_lir()
            self.s.append(k)
        self._limit_stack()
        return True

    def put(self, k):
        from_ghost = k in self.nonres
        if from_ghost:
            self.nonres.remove(k)
            self.nh.remove(k)
            self._to_top(k)
            self._room_in_lir()
        evicted = []
        if len(self.resident) == self.capacity:
            if self.q:
                v = self.q.pop(0)
                if v in self.s:  # stays in S as a ghost
                    self.nonres.add(v)
                    self.nh.append(v)
            else:
                self._prune()
                v = self.s.pop(0)
                self.lir.remove(v)
                self._prune()
            self.resident.remove(v)
            evicted.append(v)
        self.resident.add(k)
        if from_ghost:  # its record is S's top
            self.lir.add(k)
        elif len(self.lir) < self.lir_max:
            self.s.append(k)
            self.lir.add(k)
        else:
            self.s.append(k)
            self.q.append(k)
        self._limit_stack()
        return evicted
