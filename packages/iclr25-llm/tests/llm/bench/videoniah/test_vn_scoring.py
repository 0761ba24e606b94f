import json

import numpy as np
import pytest

from iclr25.llm.bench.chat import OfflineChatModel, UnsupportedModality, echo
from iclr25.llm.bench.videoniah import (
    FrameMatchSolver,
    VNBenchEval,
    build_vnbench_like,
    circular_accuracy,
    constant,
    default_galleries,
    hit_probability,
    load_vnbench,
    oracle,
    parse_letter,
    rotate,
    synthetic_haystack,
)


def _official(annos):
    """Line-by-line re-implementation of the official evaluation/eval.py (on a list of records)."""
    res = {}
    for anno in [dict(a) for a in annos]:
        name = anno["question_id"][:-2]
        label = anno["type"]
        if anno["pred"] is None:
            continue
        if label not in res:
            res[label] = []
        if anno["gt"] in [0, 1, 2, 3]:
            anno["gt"] = chr(ord("A") + anno["gt"])
        anno["pred"] = anno["pred"].split(".")[0]
        dic = {"name": name, "gt": anno["gt"], "pred": anno["pred"]}
        if "gpt_judge" in anno:
            dic["judge"] = anno["gpt_judge"][0]
        res[label].append(dic)
    result = {}
    for k, vv in sorted(res.items(), key=lambda x: x[0]):
        acc = {}
        for v in vv:
            name = v["name"]
            if name not in acc:
                acc[name] = 0
            if "judge" in v:
                acc[name] += v["judge"] == "1"
            else:
                pred = v["pred"]
                if "A" in pred:
                    pred = "A"
                elif "B" in pred:
                    pred = "B"
                elif "C" in pred:
                    pred = "C"
                elif "D" in pred:
                    pred = "D"
                acc[name] += v["gt"] == pred
        accuracy = sum(1 for ac in acc.values() if ac == 4)
        result[k] = accuracy / len(acc)
    return result, sum(result.values()) / len(result)


PREDS = ["A", "B", "C", "D", "B. because", "The answer is C", "A or B", "B or A", "", None, "(D)", "Answer: B",
         "c", "D.", "none", "C) yes", " b", "The answer is D. A is wrong"]  # fmt: skip


def _random_records(rng, n_samples):
    recs = []
    types = ["ret_insert1", "ord_edit1", "cnt_edit2"]
    for i in range(n_samples):
        t = types[i % 3]
        ans = int(rng.integers(4))
        for k in range(4):
            gt = (ans - k) % 4
            gtv = gt if rng.random() < 0.3 else "ABCD"[gt]
            pred = "ABCD"[gt] if rng.random() < 0.5 else PREDS[int(rng.integers(len(PREDS)))]
            r = {"question_id": f"{i}_{t}_{k}", "type": t, "pred": pred, "gt": gtv, "try": k}
            if rng.random() < 0.05:
                r["gpt_judge"] = [str(int(rng.integers(2)))]
            recs.append(r)
    return recs


@pytest.mark.parametrize("seed", range(4))
def test_scorer_equals_official_logic(seed):
    rng = np.random.default_rng(seed)
    recs = _random_records(rng, 125)  # 500 predictions
    per, overall = _official(recs)
    ours = circular_accuracy(recs, "official")
    assert ours["per_type"] == per
    assert ours["overall"] == pytest.approx(overall, abs=1e-12)
    assert 0 < overall < 1


def test_all_none_sample_vanishes_in_official_counts_in_strict():
    recs = [{"question_id": f"s1_{k}", "type": "t", "pred": "A", "gt": "A"} for k in range(4)]
    recs += [{"question_id": f"s2_{k}", "type": "t", "pred": None, "gt": "A"} for k in range(4)]
    off, strict = circular_accuracy(recs), circular_accuracy(recs, "strict")
    assert off["overall"] == 1.0 and off["vanished"] == 1
    assert strict["overall"] == 0.5


@pytest.mark.parametrize(
    ("text", "official", "strict"),
    [("B. because", "B", "B"), ("The answer is C", "C", None), ("A or B", "A", None), ("B or A", "A", None),
     ("", None, None), (None, None, None), ("(D)", "D", "D"), ("Answer: B", "A", None), ("c", None, None)],
)  # fmt: skip
def test_parse_letter(text, official, strict):
    assert parse_letter(text) == official
    assert parse_letter(text, "strict") == strict


def test_rotation_puts_answer_at_four_letters():
    opts = ["w", "x", "y", "z"]
    for ans in range(4):
        letters = set()
        for t in range(4):
            o, letter = rotate(opts, ans, t)
            assert sorted(o) == sorted(opts) and o["ABCD".index(letter)] == opts[ans]
            letters.add(letter)
        assert letters == set("ABCD")


def test_eval_tries_and_reference_models():
    gal = default_galleries((32, 32))
    hays = [synthetic_haystack(24, (32, 32), seed=i) for i in range(2)]
    bench = build_vnbench_like(hays, per_type=2, galleries=gal, needle_frames=1)
    ev = VNBenchEval(bench, frames=8)
    _, recs = ev.conversations("images")
    by = {}
    for r in recs:
        by.setdefault(r["question_id"][:-2], []).append(r["gt"])
    assert all(sorted(v) == list("ABCD") for v in by.values())
    assert ev.run(oracle(bench, 8)).overall == 1.0
    assert ev.run(constant("B")).overall == 0.0
    with pytest.raises(UnsupportedModality):
        ev.run(OfflineChatModel(echo()))
    with pytest.raises(ValueError, match="frames"):
        VNBenchEval(bench, frames=0)


def test_frame_match_solver_all_frames_solves_insert_types():
    gal = default_galleries((32, 32))
    hays = [synthetic_haystack(30, (32, 32), seed=i) for i in range(2)]
    bench = build_vnbench_like(
        hays, per_type=3, galleries=gal, needle_frames=1, types=["ret_insert1", "ord_insert2", "cnt_insert1"]
    )
    solver = OfflineChatModel(FrameMatchSolver([gal["text"], gal["image"]]), modalities=("text", "video"))
    res = VNBenchEval(bench, frames=None).run(solver)  # sees every frame: perfect on insert tasks
    assert res.overall == 1.0


def test_load_vnbench(tmp_path):
    v = synthetic_haystack(6, (8, 8), source="noise")
    np.save(tmp_path / "a.npy", v)
    lines = []
    opts = ["x", "y", "z", "w"]
    for t in range(4):
        o, _ = rotate(opts, 2, t)
        lines.append({"video": "a.npy", "question": "q?", "options": o, "gt": "z", "type": "ret_insert1", "try": t,
                      "question_id": f"a_ret_insert1_{t}"})  # fmt: skip
    p = tmp_path / "ann.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in lines[::-1]))
    (s,) = load_vnbench(p, tmp_path)
    assert s.options == opts and s.answer == 2 and s.sample_id == "a_ret_insert1"
    np.testing.assert_array_equal(s.video(), v)


def test_hit_probability_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        T = int(rng.integers(2, 200))
        L = int(rng.integers(1, T + 1))
        K = int(rng.integers(1, 60))
        idx = set(range(T)) if K >= T else set(np.linspace(0, T - 1, K).round().astype(int).tolist())
        hits = sum(any(s <= i < s + L for i in idx) for s in range(T - L + 1))
        assert hit_probability(T, L, K) == pytest.approx(hits / (T - L + 1), abs=1e-15)
    with pytest.raises(ValueError, match="K"):
        hit_probability(10, 2, 0)
