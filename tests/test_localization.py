"""Per-level localisation scores: answer parsing, gold keys, precision/recall by hand."""

from __future__ import annotations

import math

import pytest

from saturation import localization as L
from skyrl_fixtures import ANSWERS, GOLD, TEXT_ANSWER


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_scores_match_hand_counts(kind):
    answer, counts = ANSWERS[kind]
    scores = L.score_answer(L.answer_locations(answer), L.gold_keys(GOLD["file_changes"]))
    for level, (n_pred, n_gold, n_tp) in zip(("file", "module", "entity"), counts, strict=True):
        s = scores[level]
        assert (s["n_pred"], s["n_gold"], s["n_tp"]) == (n_pred, n_gold, n_tp), (kind, level)
        p = n_tp / n_pred if n_pred else 0.0
        r = n_tp / n_gold
        assert s["precision"] == pytest.approx(p) and s["recall"] == pytest.approx(r)
        assert s["f1"] == pytest.approx(2 * p * r / (p + r) if p + r else 0.0)


def test_text_answer_equals_structured_answer():
    assert L.answer_locations(None, TEXT_ANSWER) == L.answer_locations(ANSWERS["perfect"][0])
    # "Class.method" as the function name, a leading ./ and a key without its path prefix
    loc = L.Location("./pkg/a.py".removeprefix("./"), None, "A.m")
    assert loc.keys() == {"file": "pkg/a.py", "module": "pkg/a.py:A", "entity": "pkg/a.py:A.m"}
    gold = L.gold_keys([{"file": "./pkg/a.py", "changes": {"edited_entities": ["A.m"]}}])
    assert gold["entity"] == {"pkg/a.py:A.m"}


def test_added_locations_are_optional_gold():
    changes = [{"file": "a.py", "changes": {"edited_entities": ["a.py:f"], "added_entities": ["a.py:g"]}}]
    assert L.gold_keys(changes)["entity"] == {"a.py:f", "a.py:g"}
    assert L.gold_keys(changes, include_added=False)["entity"] == {"a.py:f"}


@pytest.mark.parametrize(("parsed", "raw", "reason"), [
    (None, "", L.NO_ANSWER),
    (None, "I could not find it.", L.NO_ANSWER),
    (None, TEXT_ANSWER + TEXT_ANSWER, L.SEVERAL_ANSWERS),
    ([[{"file": "a.py"}], [{"file": "b.py"}]], None, L.SEVERAL_ANSWERS),
    ([{"file": ""}], None, L.EMPTY_FILE_NAME),
    ([{"class_name": "A"}], None, L.FORMAT_FAILURE),
    (42, None, L.FORMAT_FAILURE),
    ("```\nclass: A\n```", None, L.FORMAT_FAILURE),
    ("```\nsee the file a.py\n```", None, L.FORMAT_FAILURE),
])
def test_ungraded_answers_keep_their_reason(parsed, raw, reason):
    with pytest.raises(L.UngradedAnswer) as info:
        L.answer_locations(parsed, raw)
    assert info.value.reason == reason


def test_levels_without_gold_or_prediction():
    s = L.score_level(set(), {"a"})
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)
    s = L.score_level({"a"}, set())
    assert s["precision"] == 0.0 and math.isnan(s["recall"]) and math.isnan(s["f1"])
    assert math.isnan(L.score_level(set(), set())["precision"])
    with pytest.raises(ValueError, match="list of"):
        L.gold_keys({"file": "a.py"})  # type: ignore[arg-type]
