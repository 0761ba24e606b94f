"""The optional judge path (judge_records) with an offline fake judge: no network."""

import re

import pytest

from iclr25.llm.bench.chat import ChatResponse, OfflineChatModel, scripted
from iclr25.llm.bench.chat.offline import last_user_text
from iclr25.llm.bench.videoniah import (
    VNBenchEval,
    build_vnbench_like,
    circular_accuracy,
    default_galleries,
    judge_records,
    rotate,
    synthetic_haystack,
)

_CORRECT = re.compile(r"^Correct answer: ([ABCD])\. (.*)$", re.M)
_PRED = re.compile(r"^Predicted answer: (.*)$", re.M)


class MeaningJudge:
    """A fake judge: "1" when the prediction names the correct option's text (case-insensitive)."""

    def __init__(self):
        self.seen = []
        self.identity = {"responder": "meaning-judge"}

    def __call__(self, conversation, config, sample_index):
        text = last_user_text(conversation)
        letter, gt = _CORRECT.search(text).groups()
        pred = _PRED.search(text).group(1)
        self.seen.append((letter, gt, pred, conversation[0].role))
        return "1" if gt.lower() in pred.lower() else "0"


@pytest.fixture(scope="module")
def bench():
    gal = default_galleries((32, 32))
    hays = [synthetic_haystack(20, (32, 32), seed=i) for i in range(2)]
    return build_vnbench_like(hays, per_type=2, galleries=gal, needle_frames=1)


def _free_form(bench, right):
    """Records with free-form (option text, no letter) predictions; ``right(sample_index, try)`` picks right/wrong."""
    _, recs = VNBenchEval(bench, frames=4).conversations("images")
    by = {s.sample_id: s for s in bench}
    for r in recs:
        s = by[r["question_id"][:-2]]
        i = int(s.sample_id.split("_")[0])
        ok = right(i, r["try"])
        r["pred"] = f"it is {s.gt.lower()}" if ok else f"it is {s.options[(s.answer + 1) % 4].lower()}"
    return recs


def test_judge_scores_free_form_answers(bench):
    # sample 0 of each type right on all 4 tries, sample 1 wrong on try 2 only: 1/2 per type by the 4/4 rule
    recs = _free_form(bench, lambda i, t: i == 0 or t != 2)
    responder = MeaningJudge()
    judged = judge_records(recs, bench, OfflineChatModel(responder))
    assert len(responder.seen) == len(recs) == 4 * len(bench)
    sc = circular_accuracy(judged)
    assert set(sc["per_type"].values()) == {0.5} and sc["overall"] == 0.5
    assert sc["per_try"] == pytest.approx(1 - 1 / 8)
    # the judge saw the correct option of each try, at the letter the rotation put it
    for r, (letter, gt, pred, role) in zip(judged, responder.seen, strict=True):
        s = next(x for x in bench if x.sample_id == r["question_id"][:-2])
        assert letter == r["gt"] == rotate(s.options, s.answer, r["try"])[1] and gt == s.gt
        assert pred == r["pred"] and role == "system"
        assert r["gpt_judge"] == (["1"] if gt.lower() in pred else ["0"])
    # without the judge the letter parser reads option text as letters: a different (wrong) score
    assert circular_accuracy(recs)["overall"] != 0.5
    assert all("gpt_judge" not in r for r in recs)  # input records untouched


def test_judge_skips_none_and_marks_failures(bench):
    recs = _free_form(bench, lambda i, t: True)
    recs[8]["pred"] = None  # try 0 of bench[2]
    ids = {r["question_id"] for r in recs[4:8]}

    def flaky(conversation, config, sample_index):
        text = last_user_text(conversation)
        pred = _PRED.search(text).group(1)
        gt = _CORRECT.search(text).group(2)
        if any(recs[j]["pred"] == pred for j in range(4, 8)) and gt == bench[1].gt:
            return ChatResponse("", "error", error="rate limited")
        return " 1\n"

    judged = judge_records(recs, bench, OfflineChatModel(flaky))
    assert "gpt_judge" not in judged[8]
    assert [judged[j]["gpt_judge"] for j in range(4, 8)] == [["No response"]] * 4
    assert {r["question_id"] for r in judged if r.get("gpt_judge") == ["No response"]} == ids
    assert all(r["gpt_judge"] == ["1"] for r in judged[:4] + judged[9:])
    sc = circular_accuracy(judged)
    assert sc["counts"][bench[1].type] == [1, 2]  # the failed sample counts as wrong, the other is right
    # the official rule skips a None try, so 3 judged-right tries are not 4/4
    assert sc["counts"][bench[2].type] == [1, 2]


def test_judge_reply_parsing_and_try_from_question_id(bench):
    recs = _free_form(bench, lambda i, t: True)[:8]
    for r in recs:
        del r["try"]  # official result files may lack it: read from the question_id suffix
    replies = scripted([("Correct answer: A", "1."), ("Correct answer: B", "yes")], default="0")
    judged = judge_records(recs, bench, OfflineChatModel(replies))
    assert [r["gpt_judge"][0] for r in judged] == ["1" if r["gt"] == "A" else "0" for r in recs]


def test_judge_bad_records(bench):
    recs = _free_form(bench, lambda i, t: True)[:4]
    recs[1] = {**recs[1], "question_id": "nope_3"}
    with pytest.raises(ValueError, match="not in samples"):
        judge_records(recs, bench, OfflineChatModel(scripted([], "1")))
    recs = _free_form(bench, lambda i, t: True)[:4]
    recs[2]["try"] = 7
    with pytest.raises(ValueError, match="try"):
        judge_records(recs, bench, OfflineChatModel(scripted([], "1")))
    assert judge_records([], bench, OfflineChatModel(scripted([], "1"))) == []
