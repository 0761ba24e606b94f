"""The VNBench protocol: lettered prompts, 4-way circular evaluation, official letter parsing, scores.

Prompt (official README)::

    <question>
    A. <option 1>
    B. <option 2>
    C. <option 3>
    D. <option 4>
    Answer with the option's letter from the given choices directly.

Each question is asked 4 times (``try`` 0..3) with the option list rotated left by ``try``, so the
answer sits at 4 different letters; a sample counts only if all 4 tries are right. In
``"official"`` mode the scorer follows the official ``eval.py``: a prediction is cut at its first
".", then the first of "A", "B", "C", "D" *in that check order* that occurs in it is the answer;
``None`` predictions are skipped (a sample whose 4 predictions are all None leaves the
denominator); overall = unweighted mean of the per-type accuracies.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chat import GenerationConfig, ImagePart, Message, TextPart, UnsupportedModality, VideoPart
from .tasks import FAMILIES, VideoSample
from .video import sample_frames

__all__ = [
    "INSTRUCTION",
    "JUDGE_SYSTEM",
    "LETTERS",
    "VNBenchEval",
    "VNBenchResult",
    "circular_accuracy",
    "format_prompt",
    "judge_records",
    "load_vnbench",
    "parse_letter",
    "rotate",
]

logger = logging.getLogger(__name__)

LETTERS = ("A", "B", "C", "D")
INSTRUCTION = "Answer with the option's letter from the given choices directly."
_STRICT = re.compile(r"^\s*(?:\(([ABCD])\)|([ABCD])(?:[.:)]|\s*$))")


def parse_letter(text: str | None, mode: str = "official") -> str | None:
    """The option letter a prediction names, or None.

    Parameters
    ----------
    text : the model's reply.
    mode : ``"official"`` (cut at the first ".", then the first of A, B, C, D found, checked in that
        order, so "B or A" reads as A) or ``"strict"`` (a single letter or ``"(X)"``/``"X."``/``"X:"``
        at the start of the reply, else None).
    """
    if mode not in ("official", "strict"):
        raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"text must be str or None, got {type(text).__name__}")
    if mode == "strict":
        m = _STRICT.match(text)
        return (m.group(1) or m.group(2)) if m else None
    head = text.split(".")[0]
    for letter in LETTERS:
        if letter in head:
            return letter
    return None


def _gt_letter(gt: Any) -> Any:
    # the official script maps an int gt 0..3 to a letter and leaves anything else as is
    if isinstance(gt, (int, np.integer)) and not isinstance(gt, bool) and 0 <= int(gt) <= 3:
        return LETTERS[int(gt)]
    return gt


def _check_record(i: int, r: Any, keys: Sequence[str]) -> None:
    if not isinstance(r, Mapping):
        raise TypeError(
            f"records[{i}] must be a mapping with question_id, type, pred and gt, got {type(r).__name__} {r!r:.80}"
        )
    missing = [k for k in keys if k not in r]
    if missing:
        raise ValueError(f"records[{i}] lacks the field(s) {missing}; expected question_id, type, pred and gt")


def circular_accuracy(records: Iterable[Mapping[str, Any]], mode: str = "official") -> dict[str, Any]:
    """Score prediction records with the 4/4 circular rule.

    Parameters
    ----------
    records : dicts with ``question_id`` (``<sample id>_<try>``, the sample id is ``question_id[:-2]``),
        ``type``, ``pred`` (str or None), ``gt`` (a letter or an int 0..3) and optionally
        ``gpt_judge`` (a list whose first item "1" marks the try right).
    mode : ``"official"`` (None predictions skipped) or ``"strict"`` (None counts as wrong, and
        letters are read with the strict parser).

    Returns
    -------
    dict with ``per_type`` {type: accuracy}, ``counts`` {type: [correct, total]}, ``families``
    {family: mean of its types}, ``overall`` (mean over types), ``per_try`` (fraction of right
    tries), ``vanished`` (samples whose tries were all None, official mode only).

    Raises
    ------
    TypeError : a record that is not a mapping, or a ``pred`` that is neither a str nor None.
    ValueError : a record without ``question_id`` or ``type`` (or ``gt`` where it is scored).
    """
    if mode not in ("official", "strict"):
        raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")
    hits: dict[str, dict[str, int]] = defaultdict(dict)
    all_names: dict[str, set[str]] = defaultdict(set)
    n_try = n_right = 0
    for i, r in enumerate(records):
        _check_record(i, r, ("question_id", "type"))
        label, name = r["type"], str(r["question_id"])[:-2]
        all_names[label].add(name)
        pred = r.get("pred")
        if pred is None and mode == "official":
            continue
        _check_record(i, r, ("gt",))
        gt = _gt_letter(r["gt"])
        if "gpt_judge" not in r and pred is not None and not isinstance(pred, str):
            raise TypeError(f"records[{i}]: pred must be a str or None, got {type(pred).__name__} {pred!r}")
        if "gpt_judge" in r:
            ok = r["gpt_judge"][0] == "1"
        elif mode == "official":
            head = pred.split(".")[0]
            letter = parse_letter(head, "official")
            ok = gt == (letter if letter is not None else head)
        else:
            ok = pred is not None and parse_letter(pred, "strict") == gt
        hits[label][name] = hits[label].get(name, 0) + int(ok)
        n_try += 1
        n_right += int(ok)
    per_type, counts = {}, {}
    for label in sorted(hits):
        acc = hits[label]
        correct = sum(1 for v in acc.values() if v == 4)
        per_type[label] = correct / len(acc)
        counts[label] = [correct, len(acc)]
    fam: dict[str, list[float]] = defaultdict(list)
    for label, a in per_type.items():
        fam[FAMILIES.get(label.split("_")[0], label)].append(a)
    vanished = sum(len(all_names[lb] - set(hits.get(lb, {}))) for lb in all_names) if mode == "official" else 0
    return {
        "per_type": per_type,
        "counts": counts,
        "families": {k: float(np.mean(v)) for k, v in fam.items()},
        "overall": float(np.mean(list(per_type.values()))) if per_type else 0.0,
        "per_try": n_right / n_try if n_try else 0.0,
        "vanished": vanished,
    }


def rotate(options: Sequence[str], answer: int, t: int) -> tuple[list[str], str]:
    """Options of try ``t`` (rotated left by t) and the answer's letter there."""
    opts = list(options[t:]) + list(options[:t])
    return opts, LETTERS[(answer - t) % 4]


def format_prompt(question: str, options: Sequence[str]) -> str:
    """The official prompt text for one try."""
    lines = [question] + [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)] + [INSTRUCTION]
    return "\n".join(lines)


@dataclass
class VNBenchResult:
    """Scores of one evaluation run.

    Attributes
    ----------
    per_type : {type: circular accuracy}.
    families : {"retrieval"|"ordering"|"counting": mean accuracy of its types}.
    overall : unweighted mean of the per-type accuracies.
    per_try : fraction of individual tries answered right.
    vanished : samples dropped by the official rule (all 4 predictions None).
    records : official-format prediction records (``question_id, type, try, pred, gt``).
    """

    per_type: dict[str, float]
    families: dict[str, float]
    overall: float
    per_try: float
    vanished: int
    counts: dict[str, list[int]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def table(self) -> list[dict[str, Any]]:
        """Rows ``{type, correct, total, accuracy}`` (convert with ``pandas.DataFrame(res.table())``)."""
        return [
            {"type": t, "correct": self.counts[t][0], "total": self.counts[t][1], "accuracy": a}
            for t, a in self.per_type.items()
        ]

    def save_jsonl(self, path: str | os.PathLike) -> None:
        """Write the records in the official result format (readable by the official ``eval.py``)."""
        from iclr25.core.io import atomic_write_text

        atomic_write_text(Path(path), "".join(json.dumps(r) + "\n" for r in self.records))


class VNBenchEval:
    """Evaluate a video-capable ChatModel with the VNBench protocol.

    Parameters
    ----------
    samples : the benchmark.
    frames : number of frames K sampled uniformly (``round(linspace(0, T-1, K))``, de-duplicated);
        ``None`` passes every frame.
    letter_mode : ``"official"`` or ``"strict"`` (see :func:`parse_letter`).
    media : ``"auto"`` (a VideoPart when the model accepts video, else the sampled frames as
        ImageParts), ``"video"`` or ``"images"``.
    config : generation settings (default: greedy, at most 5 tokens as in the official example).
    """

    def __init__(
        self,
        samples: Sequence[VideoSample],
        *,
        frames: int | None = 16,
        letter_mode: str = "official",
        media: str = "auto",
        config: GenerationConfig | None = None,
    ) -> None:
        if frames is not None and (not isinstance(frames, (int, np.integer)) or frames < 1):
            raise ValueError(f"frames (K) must be an int >= 1 or None, got {frames!r}")
        if letter_mode not in ("official", "strict"):
            raise ValueError(f"letter_mode must be 'official' or 'strict', got {letter_mode!r}")
        if media not in ("auto", "video", "images"):
            raise ValueError(f"media must be 'auto', 'video' or 'images', got {media!r}")
        if not samples:
            raise ValueError("samples must be a non-empty list of VideoSample")
        self.samples = list(samples)
        self.frames, self.letter_mode, self.media = frames, letter_mode, media
        self.config = config or GenerationConfig(max_tokens=5, temperature=0.0)

    def _media(self, caps: tuple[str, ...]) -> str:
        if self.media == "video" or (self.media == "auto" and "video" in caps):
            if "video" not in caps:
                raise UnsupportedModality(f"media='video' but the model accepts {list(caps)}")
            return "video"
        if "image" not in caps:
            raise UnsupportedModality(
                f"VNBench needs a model that accepts video or images; this one accepts {list(caps)}"
            )
        return "images"

    def conversations(self, media: str = "video") -> tuple[list[list[Message]], list[dict[str, Any]]]:
        """The 4 conversations per sample and their records (``pred`` not yet filled)."""
        convs, recs = [], []
        for s in self.samples:
            video = s.video()
            if self.frames is None:
                sub = video
            else:
                sub, _ = sample_frames(video, min(int(self.frames), video.shape[0]))
            if media == "video":
                vis: list[Any] = [VideoPart(np.ascontiguousarray(sub), fps=float(s.fps))]
            else:
                vis = [ImagePart(np.ascontiguousarray(f)) for f in sub]
            for t in range(4):
                opts, letter = rotate(s.options, s.answer, t)
                text = format_prompt(s.question, opts)
                convs.append([Message("user", [*vis, TextPart(text)])])
                recs.append(
                    {"question_id": f"{s.sample_id}_{t}", "type": s.type, "try": t, "gt": letter, "prompt": text}
                )
        return convs, recs

    def run(self, model: Any, *, progress: bool = False) -> VNBenchResult:
        """Ask every try, parse the letters and score.

        Raises
        ------
        UnsupportedModality : before any call, when the model accepts neither video nor images.
        """
        media = self._media(tuple(model.capabilities().modalities))
        convs, recs = self.conversations(media)
        out = model.generate(convs, self.config, progress=progress)
        for r, resp in zip(recs, out, strict=True):
            r["pred"] = resp[0].text if resp and resp[0].ok else None
        return self.score(recs)

    def score(self, records: list[dict[str, Any]]) -> VNBenchResult:
        """Score filled records with this evaluator's letter mode."""
        sc = circular_accuracy(records, self.letter_mode)
        return VNBenchResult(
            sc["per_type"], sc["families"], sc["overall"], sc["per_try"], sc["vanished"], sc["counts"], records
        )


JUDGE_SYSTEM = (
    "You grade answers to multiple-choice questions about videos. Compare the predicted answer with "
    "the correct answer and decide whether they mean the same thing; synonyms and paraphrases count as "
    "a match."
)


def _judge_prompt(sample: VideoSample, t: int, pred: str) -> str:
    opts, letter = rotate(sample.options, sample.answer, t)
    return (
        "Question and options:\n"
        + "\n".join([sample.question] + [f"{LETTERS[j]}. {o}" for j, o in enumerate(opts)])
        + f"\nCorrect answer: {letter}. {sample.gt}\nPredicted answer: {pred}\n"
        "Output 1 if the predicted answer means the same as the correct answer, otherwise 0. "
        "Output only the digit."
    )


def judge_records(
    records: Sequence[Mapping[str, Any]],
    samples: Sequence[VideoSample],
    judge: Any,
    *,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Optional judge path (as the official ``gpt_judge.py``): a ChatModel marks each free-form reply 1/0.

    Parameters
    ----------
    records : filled prediction records (``VNBenchResult.records`` or the official result format):
        ``question_id`` (``<sample id>_<try>``), ``pred`` and optionally ``try`` (else read from the
        ``question_id`` suffix).
    samples : the samples the records were made from (matched by ``sample_id``).
    judge : a text ChatModel; it sees the question, the options of that try, the correct answer
        (letter and text) and the prediction, and is asked for a single digit.
    progress : show a progress bar over the judge calls.

    Returns
    -------
    New records (the input is not modified). Every record with a prediction gets ``gpt_judge``:
    ``["1"]`` when the judge's reply starts with "1", ``["0"]`` otherwise, and ``["No response"]``
    when the judge call failed (counted as wrong, as the official script does); records whose
    ``pred`` is None are left without it. :func:`circular_accuracy` then uses the judgement instead
    of the letter.

    Raises
    ------
    ValueError : a record whose sample id is not among ``samples`` or whose try is not 0..3.
    """
    by_id = {s.sample_id: s for s in samples}
    convs, idx = [], []
    for i, r in enumerate(records):
        if r.get("pred") is None:
            continue
        qid = str(r["question_id"])
        s = by_id.get(qid[:-2])
        if s is None:
            raise ValueError(f"records[{i}]: question_id {qid!r} names sample {qid[:-2]!r}, which is not in samples")
        t = r.get("try", qid[-1])
        if str(t) not in ("0", "1", "2", "3"):
            raise ValueError(f"records[{i}]: try must be 0..3, got {t!r}")
        convs.append([Message("system", JUDGE_SYSTEM), Message("user", _judge_prompt(s, int(t), str(r["pred"])))])
        idx.append(i)
    # max_tokens as in the official script; the reply should be one digit
    cfg = GenerationConfig(max_tokens=10, temperature=0.0)
    out = judge.generate(convs, cfg, progress=progress) if convs else []
    res = [dict(r) for r in records]
    failed = 0
    for i, resp in zip(idx, out, strict=True):
        if not resp or not resp[0].ok:
            res[i]["gpt_judge"] = ["No response"]
            failed += 1
        else:
            res[i]["gpt_judge"] = ["1" if resp[0].text.strip().startswith("1") else "0"]
    if failed:
        logger.warning("judge_records: %d of %d judge calls failed; they count as wrong", failed, len(idx))
    return res


def load_vnbench(annotation_path: str | os.PathLike, video_root: str | os.PathLike) -> list[VideoSample]:
    """Load published VNBench annotations (JSON list or JSONL) as samples with lazily loaded videos.

    Records carry ``video`` (relative to ``video_root``), ``question``, ``options`` (4 strings),
    ``gt`` (option text or an int index), ``type``, ``try`` and optionally ``question_id``. The 4
    tries of a question are grouped into one sample (its try-0 option order). Videos are decoded
    by :func:`load_video` when first used (``.npy``/``.npz``/frame folders natively, ``.mp4`` with PyAV).
    """
    p = Path(annotation_path)
    if not p.is_file():
        raise FileNotFoundError(f"annotation file not found: {os.fspath(p)!r}")
    text = p.read_text()
    stripped = text.lstrip()
    recs = json.loads(text) if stripped.startswith("[") else [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    groups: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(recs):
        for k in ("video", "question", "options", "gt", "type"):
            if k not in r:
                raise ValueError(f"annotation record {i} lacks the field {k!r}")
        try:
            t = int(r.get("try", 0))
        except (TypeError, ValueError):
            t = -1
        if not 0 <= t <= 3:
            raise ValueError(f"annotation record {i}: try must be an int 0..3, got {r.get('try')!r}")
        qid = str(r["question_id"])[:-2] if "question_id" in r else f"{r['video']}_{r['type']}"
        key = f"{qid}|{r['question']}" if "question_id" not in r else qid
        if key not in groups or t == 0:
            groups[key] = {**r, "_id": qid}
    out = []
    for g in groups.values():
        opts = [str(o) for o in g["options"]]
        gt = g["gt"]
        if isinstance(gt, (int, np.integer)) and not isinstance(gt, bool):
            ans = int(gt)
        elif str(gt) in opts:
            ans = opts.index(str(gt))
        elif str(gt) in LETTERS:
            ans = LETTERS.index(str(gt))
        else:
            raise ValueError(f"gt {gt!r} of {g['_id']!r} is neither an option, a letter nor an index")
        # the option order of a try t record is rotated by t; undo it to get try-0 order
        t = int(g.get("try", 0))
        if t:
            opts = opts[-t:] + opts[:-t]
            ans = (ans + t) % 4
        out.append(
            VideoSample(
                None,
                str(g["question"]),
                opts,
                ans,
                str(g["type"]),
                g["_id"],
                float(g.get("fps", 1.0)),
                {"source": "vnbench"},
                os.fspath(Path(video_root) / g["video"]),
            )
        )
    return out
