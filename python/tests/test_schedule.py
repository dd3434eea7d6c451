"""frugal.schedule against brute force: every graph-switch plan of small problems, every
subset of fragments for placement."""
import itertools

import numpy as np
import pytest

import frugal
from frugal import schedule as sch
from frugal import sim


def random_problem(rng, blocks, chunks):
    return sch.GraphSwitchProblem(prefill_compute=rng.uniform(0.5, 2, blocks).tolist(),
                                  decode_compute=rng.uniform(0.8, 2.5, blocks).tolist(),
                                  load=rng.uniform(0.5, 4, blocks).tolist(), chunks=chunks)


def test_graph_switch_against_every_plan(rng):
    for _ in range(25):
        blocks, chunks = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        p = random_problem(rng, blocks, chunks)
        best = min(sch.graph_switch_makespan(p, list(plan))
                   for plan in itertools.product(range(chunks + 1), repeat=blocks))
        exact = sch.exact_graph_switch(p)
        greedy = sch.greedy_graph_switch(p)
        paper = sim.paper_greedy_graph_switch(p)
        assert sch.graph_switch_makespan(p, exact) == pytest.approx(best, rel=1e-12)
        assert best - 1e-9 <= sch.graph_switch_makespan(p, greedy) <= sch.graph_switch_makespan(p, paper) + 1e-9
        t = sch.graph_switch_timeline(p, greedy)
        assert len(t.compute_task) == blocks * chunks and len(t.load_task) == blocks
        assert t.timeline.simulate().makespan == pytest.approx(sch.graph_switch_makespan(p, greedy))


def test_graph_switch_errors():
    with pytest.raises(frugal.InvalidArgumentError, match="must be equal"):
        sch.GraphSwitchProblem(prefill_compute=[1.0], decode_compute=[1.0, 2.0], load=[1.0])
    p = sch.GraphSwitchProblem(prefill_compute=[1.0], decode_compute=[1.0], load=[1.0], chunks=2)
    with pytest.raises(frugal.InvalidArgumentError, match="switches at chunk 3 > chunks = 2"):
        sch.graph_switch_makespan(p, [3])


def test_placement_against_every_subset(rng):
    for _ in range(30):
        n = int(rng.integers(1, 9))
        frags = [sch.Fragment(int(rng.integers(1, 50)), sorted(set(rng.integers(0, 6, int(rng.integers(1, 4))).tolist())))
                 for _ in range(n)]
        limit = int(rng.integers(min(f.bytes for f in frags), 120))
        best_kept = best_transfer = None
        total_traffic = sum(f.bytes * len(f.blocks) for f in frags)
        for r in range(n + 1):
            for subset in itertools.combinations(range(n), r):
                size = sum(frags[i].bytes for i in subset)
                if size > limit:
                    continue
                saved = sum(frags[i].bytes * len(frags[i].blocks) for i in subset)
                best_kept = size if best_kept is None else max(best_kept, size)
                best_transfer = total_traffic - saved if best_transfer is None else min(best_transfer, total_traffic - saved)
        kept = sch.place_fragments(frags, limit, sch.PlacementObjective.bytes_kept)
        moved = sch.place_fragments(frags, limit, sch.PlacementObjective.transfer)
        assert kept.exact and kept.resident_bytes == best_kept
        assert moved.exact and moved.transfer_bytes_per_pass == best_transfer
        order = sorted(range(n), key=lambda i: frags[i].bytes)  # smallest first, stop at the first misfit
        chosen, used = [], 0
        for i in order:
            if used + frags[i].bytes > limit:
                break
            chosen.append(i)
            used += frags[i].bytes
        assert sch.place_fragments(frags, limit, sch.PlacementObjective.smallest_first).resident == sorted(chosen)


def test_placement_timeline_and_timeline():
    frags = [sch.Fragment(100, [0]), sch.Fragment(200, [1])]
    p = sch.place_fragments(frags, 100, sch.PlacementObjective.bytes_kept)
    assert p.resident == [0]
    r = sch.placement_timeline(frags, p, np.array([1.0, 1.0]), 100.0).simulate()
    # block 0 computes 0..1; block 1's fragment loads 0..2 (200 B at 100 B/s), computes 2..3
    assert r.makespan == pytest.approx(3.0) and r.peak_resident_bytes == 300
    t = sch.Timeline()
    load = t.add(sch.Resource.io, 2.0, acquire_bytes=100)
    t.add(sch.Resource.compute, 1.0, after=[load], release_bytes=100)
    r = t.simulate()
    assert r.makespan == 3.0 and r.peak_resident_bytes == 100 and r.start.tolist() == [0.0, 2.0]
    assert r.busy_time(sch.Resource.io) == 2.0 and r.idle_time(sch.Resource.compute) == 2.0
