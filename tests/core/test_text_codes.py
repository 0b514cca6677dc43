"""Range names factorized once per trace (parsers/read/text_codes.py): each view of the codes says
what pandas says of the text column itself, and the loader's columns are the ones pandas builds
from the same Python strings."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsight_tui.parsers.read.text_codes import LONG_TEXTS, Coded, inferred_text_dtype, text_column

LONG = "b" * 3 * LONG_TEXTS
TEXTS = ["step_1", ":forward", LONG, "é" * 5, "", "step_1", LONG, "aten::mm, seq = 3, op_id = 9", ":forward", "Z"]


def column(texts) -> pd.Series:
    return pd.Series(np.array(texts, dtype=object))  # the dtype pandas gives Python strings


@pytest.mark.parametrize("texts", [TEXTS, [], ["only"], [LONG] * 4])
def test_codes_are_pandas_factorize_of_the_column(texts):
    coded = Coded.of(column(texts))
    codes, uniques = pd.factorize(np.array(texts, dtype=object))
    assert coded.codes.tolist() == codes.tolist()
    assert coded.values.tolist() == list(uniques)
    assert coded.objects.tolist() == list(texts)
    assert not coded.objects.flags.writeable  # shared by every caller


@pytest.mark.parametrize("texts", [TEXTS, ["only"], [LONG] * 4])
def test_from_codes_is_of_the_column_it_would_build(texts):
    # the same texts numbered otherwise, with a text repeated under two codes
    distinct = sorted(set(texts), reverse=True)
    table = distinct + distinct[:1]
    codes = np.array([len(distinct) if t == distinct[0] and i % 2 else distinct.index(t) for i, t in enumerate(texts)])
    assert [table[c] for c in codes] == list(texts)
    got, want = Coded.from_codes(codes, table), Coded.of(column(texts))
    assert got.codes.tolist() == want.codes.tolist() and got.values.tolist() == want.values.tolist()


def test_per_value_asks_each_distinct_text_once_and_keeps_a_keyed_answer():
    coded = Coded.of(column(TEXTS))
    asked = []

    def test(t):
        asked.append(t)
        return t.startswith("step_")

    got = coded.per_value(test, key="step")
    assert got.tolist() == [t.startswith("step_") for t in TEXTS]
    assert sorted(asked, key=TEXTS.index) == list(dict.fromkeys(TEXTS))  # once each, None never (none missing)
    assert coded.per_value(lambda t: 1 / 0, key="step") is got  # kept: not asked again


def test_a_missing_text_is_asked_as_none():
    coded = Coded.of(pd.Series(["a", None, "b"], dtype=inferred_text_dtype()))
    assert coded.per_value(lambda t: t is None).tolist() == [False, True, False]
    assert coded.objects[0] == "a" and pd.isna(coded.objects[1])


def test_sorted_ranks_are_factorize_sorted():
    coded = Coded.of(column(TEXTS))
    ranks, by_rank = coded.sorted_ranks
    codes, uniques = pd.factorize(column(TEXTS), sort=True)
    assert ranks.tolist() == codes.tolist() and by_rank == list(uniques)


@pytest.mark.parametrize("texts", [TEXTS, [LONG] * 5 + ["x"], ["x", "y"] * 3])
def test_text_column_is_the_column_pandas_builds(texts):
    codes, uniques = pd.factorize(np.array(texts, dtype=object))
    got = text_column(np.asarray(codes), list(uniques), inferred_text_dtype())
    pd.testing.assert_series_equal(got, column(texts), check_exact=True)
