"""The Python examples: the speculative-decoding study reproduces the published PLD figures of
the bundled file and frugal-bench's MAT exactly; the reranker study and the overhead benchmark run."""
import importlib.util
import json
import os
import subprocess

import pytest

from conftest import ROOT


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


spec_decode = load(ROOT / "examples" / "python" / "spec_decode_study.py")
rerank = load(ROOT / "examples" / "python" / "rerank_pruning_study.py")


@pytest.mark.parametrize("k,steps,mat", [(10, 42128, 1.669), (5, 43493, 1.617)])
def test_pld_reproduces_the_published_reference(specbench, k, steps, mat):
    # ../shared/data/drafting/README.md: PLD (max n-gram 3) on the whole file.
    records = spec_decode.read_tok(specbench)
    row = spec_decode.rows(records, ["pld"], k, 64, True)[0]
    assert row["category"] == "all" and row["records"] == 480
    assert row["steps"] == steps and round(row["mat"], 3) == mat


def test_mat_equals_frugal_bench(specbench):
    bench = os.environ.get("FRUGAL_BENCH")
    if not bench or not os.path.exists(bench):
        pytest.skip("set FRUGAL_BENCH to a frugal-bench executable (ctest does when the bench is built)")
    out = subprocess.run([bench, "draft", "--data", str(specbench), "--json"], capture_output=True, text=True,
                         check=True).stdout
    want = {(r["drafter"], r["category"]): r for r in map(json.loads, out.splitlines())}
    got = spec_decode.rows(spec_decode.read_tok(specbench), ["pld", "sam", "sam-tree"], 10, 64, True)
    assert [(r["drafter"], r["category"]) for r in got] == list(want)  # same rows, same order
    for r in got:
        w = want[(r["drafter"], r["category"])]
        assert (r["records"], r["mat"], r["accept_rate"], r["drafted_per_step"]) == \
               (w["records"], w["mat"], w["accept_rate"], w["drafted_per_step"]), r


def test_spec_decode_study_prints_a_table(specbench, tmp_path, capsys):
    small = tmp_path / "small.tok"
    small.write_text("".join(specbench.read_text().splitlines(keepends=True)[:30]))
    spec_decode.main([str(small), "--drafter", "sam"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["drafter", "category", "records", "mat", "accept_rate", "drafted_per_step",
                                "tokens", "steps"]
    assert lines[2].split()[:3] == ["sam", "all", "10"]


def test_rerank_study_runs():
    lines = []
    calibration, precision = rerank.study(queries=8, pool=32, k=5, target=0.9, calibration_queries=30, seed=3,
                                          out=lines.append)
    assert precision["unpruned"] == 1.0 and 0.0 <= precision["pruned"] <= 1.0
    assert calibration.met == (calibration.threshold != float("inf"))
    assert "pruned" in lines[-1]


def test_overhead_benchmark_runs(capsys):
    bench = load(ROOT / "python" / "benchmarks" / "overhead.py")
    bench.main(["--repeats", "1", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(bench.CASES) >= 2
    assert all(r["python_us"] > 0 and r["cpp_us"] > 0 for r in rows)
