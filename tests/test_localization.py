"""Per-level localisation scores, graded as codescout's reward grades (counts by hand)."""

from __future__ import annotations

import json

import pytest

from saturation import localization as L
from skyrl_fixtures import ANSWERS, GOLD, TEXT_ANSWER, f1_by_hand, transcript


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_scores_match_hand_counts(kind):
    answer, counts = ANSWERS[kind]
    scores = L.score_answer(L.finish_call_locations(json.dumps(answer)) or [], L.gold_keys(GOLD))
    for level, (n_pred, n_gold, n_tp) in zip(("file", "module", "entity"), counts, strict=True):
        s = scores[level]
        assert (s["n_pred"], s["n_gold"], s["n_tp"]) == (n_pred, n_gold, n_tp), (kind, level)
        assert s["precision"] == pytest.approx(n_tp / n_pred if n_pred else 0.0)
        assert s["recall"] == pytest.approx(n_tp / n_gold)
        assert s["f1"] == pytest.approx(f1_by_hand(n_pred, n_gold, n_tp))


def test_location_keys_follow_the_upstream_rules():
    # a top-level function is both the module and the entity; "C.m" as a function name stays verbatim
    assert L.Location("a.py", None, "f").keys() == {"file": "a.py", "module": "a.py:f", "entity": "a.py:f"}
    assert L.Location("a.py", "C", None).keys() == {"file": "a.py", "module": "a.py:C", "entity": None}
    assert L.Location("a.py", None, "C.m").keys()["entity"] == "a.py:C.m"
    assert L.Location("./a.py", "", "").keys() == {"file": "./a.py", "module": None, "entity": None}


def test_only_a_finish_call_is_an_answer():
    assert L.finish_call_locations("") is None
    assert L.finish_call_locations(TEXT_ANSWER) is None  # plain text: no finish call
    assert L.finish_call_locations("[not json") is None
    with pytest.raises(L.UngradedAnswer) as info:
        L.finish_call_locations('[{"file": 3}]')
    assert info.value.reason == L.FORMAT_FAILURE
    with pytest.raises(L.UngradedAnswer):
        L.finish_call_locations('["pkg/a.py"]')


def test_added_locations_are_optional_gold_and_null_lists_empty():
    assert L.gold_keys(GOLD)["entity"] == {"pkg/a.py:A.m", "pkg/b.py:f"}
    assert L.gold_keys(GOLD, include_added=True)["entity"] == {"pkg/a.py:A.m", "pkg/a.py:A.new", "pkg/b.py:f"}
    assert L.gold_keys([{"file": "a.py", "changes": {"edited_modules": None}}])["module"] == set()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"file": "a.py"}, "not a list"),
        ("a.py", "not a list"),
        ([{"changes": {}}], r"file_changes\[0\] has no 'file'"),
        ([{"file": "a.py", "changes": {"edited_entities": "a.py:f"}}], r"edited_entities is a str, not a list"),
        ([{"file": "a.py", "changes": {"edited_modules": [1]}}], "not a string"),
        ([{"file": "a.py", "changes": []}], r"changes is a list"),
    ],
)
def test_malformed_gold_names_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        L.gold_keys(changes)


def test_empty_gold_scores_zero_and_unknown_gold_nan():
    s = L.score_level({"a"}, set())
    assert (s["precision"], s["recall"], s["f1"], s["n_gold"]) == (0.0, 0.0, 0.0, 0.0)
    s = L.score_level(set(), set())
    assert s["f1"] == 0.0
    s = L.score_level({"a"}, None)
    assert s["n_pred"] == 1 and all(s[k] != s[k] for k in ("f1", "precision", "recall", "n_gold", "n_tp"))
    s = L.score_level(set(), {"a"})
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)


def test_blank_file_empties_the_prediction():
    pred = L.predicted_keys([L.Location("a.py", "A", "m"), L.Location("  ", None, "f")])
    assert pred == {"file": set(), "module": set(), "entity": set()}


def test_finish_calls_in_a_transcript():
    calls = L.finish_calls_in_transcript(transcript(ANSWERS["perfect"][0]))
    assert calls == [[L.Location("pkg/a.py", "A", "m"), L.Location("pkg/b.py", None, "f")]]
    assert L.finish_calls_in_transcript(transcript(None)) == []  # tool output is never read as an answer
    assert len(L.finish_calls_in_transcript(transcript(ANSWERS["wrong"][0], calls=2))) == 2
    # arguments as a JSON string, as some parsers emit them
    text = (
        "<tool_call>"
        + json.dumps({"name": "localization_finish", "arguments": json.dumps({"locations": ANSWERS["wrong"][0]})})
        + "</tool_call>"
    )
    assert L.finish_calls_in_transcript(text) == [[L.Location("pkg/c.py", None, "g")]]


def test_text_answers_parse_as_agentic_code_search_does():
    keys = L.text_answer_keys(TEXT_ANSWER.split("```")[1])
    assert keys == {
        "file": {"pkg/a.py", "pkg/b.py"},
        "module": {"pkg/a.py:A", "pkg/b.py:f"},
        "entity": {"pkg/a.py:A.m", "pkg/b.py:f"},
    }
    # a file without a function line is not counted; "C.m" splits; a trailing __init__ is dropped
    keys = L.text_answer_keys("x.py\n\ny.py\nfunction: C.__init__\nmethod: D.run")
    assert keys == {"file": {"y.py"}, "module": {"y.py:C", "y.py:D"}, "entity": {"y.py:C", "y.py:D.run"}}
    assert L.gold_files_from_target_string("[('monai/__init__.py', [44, 3])]") == {"monai/__init__.py"}
    with pytest.raises(ValueError, match="not a list of"):
        L.gold_files_from_target_string("{'a': 1}")
