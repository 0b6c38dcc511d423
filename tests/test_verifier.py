"""The answer verifier, as a spec: what each answer type accepts and what it rejects.

Each section shows matches AND near-misses, so a verifier that accepts too much fails as surely as
one that accepts too little. The property tests at the end check `format_answer` round trips (the
oracle's answer is always correct, in any row order when order does not matter) and that changing
one cell of the gold rows is always noticed.
"""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlenv.data.records import AnswerType, Cell, infer_answer_type
from sqlenv.env.verifier import (
    Verdict,
    cell_matches,
    format_answer,
    is_empty_answer,
    parse_number,
    rows_equal_unordered,
    strip_wrapping,
    verify_answer,
)

Rows = list[list[Cell]]


def accepts(answer: str, gold: Rows, answer_type: AnswerType, order_sensitive: bool = False) -> bool:
    return verify_answer(answer, gold, answer_type, order_sensitive).correct


# --------------------------------------------------------------------------------------- integer

INTEGER_GOLD: Rows = [[42]]


@pytest.mark.parametrize("answer", ["42", "42.0", " 42 ", "42.", "+42", "\n42\n"])
def test_integer_accepts_the_same_number_in_any_spelling(answer: str) -> None:
    assert accepts(answer, INTEGER_GOLD, "integer")


def test_integer_accepts_thousands_separators() -> None:
    assert accepts("1,234", [[1234]], "integer")
    assert accepts("1,234,567", [[1234567]], "integer")
    assert not accepts("1,235", [[1234]], "integer")


@pytest.mark.parametrize("answer", ["43", "41", "42.5", "42.01", "-42", "forty-two", "", "42 apples", "4 2"])
def test_integer_rejects_any_other_value(answer: str) -> None:
    assert not accepts(answer, INTEGER_GOLD, "integer")


def test_integer_has_no_tolerance_even_for_large_values() -> None:
    assert accepts("1000000", [[1_000_000]], "integer")
    assert not accepts("1000001", [[1_000_000]], "integer")
    assert not accepts("999999", [[1_000_000]], "integer")


def test_integer_zero_and_negative() -> None:
    assert accepts("0", [[0]], "integer")
    assert accepts("-7", [[-7]], "integer")
    assert not accepts("7", [[-7]], "integer")
    assert not accepts("", [[0]], "integer")
    assert not accepts("null", [[0]], "integer")


# ----------------------------------------------------------------------------------------- float

FLOAT_GOLD: Rows = [[100.0]]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("100", True),
        ("100.0", True),
        ("100.99", True),  # +0.99 %
        ("101.01", False),  # +1.01 %
        ("99.01", True),  # -0.99 %
        ("98.99", False),  # -1.01 %
        ("1e2", True),
        ("110", False),
        ("-100", False),
        ("a hundred", False),
        ("", False),
    ],
)
def test_float_is_within_one_percent_relative(answer: str, expected: bool) -> None:
    assert accepts(answer, FLOAT_GOLD, "float") is expected


@pytest.mark.parametrize(("answer", "expected"), [("-50.4", True), ("-49.6", True), ("-50.6", False)])
def test_float_tolerance_is_relative_to_the_magnitude_of_a_negative_gold(answer: str, expected: bool) -> None:
    assert accepts(answer, [[-50.0]], "float") is expected


def test_float_sign_matters() -> None:
    assert not accepts("50", [[-50.0]], "float")
    assert not accepts("-50", [[50.0]], "float")


@pytest.mark.parametrize(
    ("answer", "expected"), [("0", True), ("0.0", True), ("-0.0", True), ("1e-12", True)]
)
def test_float_zero_gold_accepts_only_about_zero(answer: str, expected: bool) -> None:
    assert accepts(answer, [[0.0]], "float") is expected


@pytest.mark.parametrize("answer", ["0.001", "1e-6", "-0.0001", "1", "zero"])
def test_float_zero_gold_rejects_small_but_nonzero(answer: str) -> None:
    assert not accepts(answer, [[0.0]], "float")


def test_float_accepts_an_integer_for_an_integral_gold() -> None:
    assert accepts("3", [[3.0]], "float")
    assert not accepts("4", [[3.0]], "float")
    assert not accepts("3", [[3.5]], "float")


def test_float_tolerance_is_a_parameter() -> None:
    assert not verify_answer("105", FLOAT_GOLD, "float", False).correct
    assert verify_answer("105", FLOAT_GOLD, "float", False, float_tolerance=0.1).correct
    assert not verify_answer("111", FLOAT_GOLD, "float", False, float_tolerance=0.1).correct


# ---------------------------------------------------------------------------------------- string

STRING_GOLD: Rows = [["Paris"]]


@pytest.mark.parametrize("answer", ["Paris", "paris", "PARIS", "  Paris  ", "'Paris'", '"Paris"', "Paris."])
def test_string_is_trimmed_and_case_insensitive(answer: str) -> None:
    assert accepts(answer, STRING_GOLD, "string")


@pytest.mark.parametrize("answer", ["London", "Pari", "Parisx", "Paris, France", "P a r i s", ""])
def test_string_rejects_a_different_string(answer: str) -> None:
    assert not accepts(answer, STRING_GOLD, "string")


def test_string_numeric_gold_matches_numerically() -> None:
    assert accepts("1990", [["1990"]], "string")
    assert accepts("1990.0", [["1990"]], "string")
    assert not accepts("1991", [["1990"]], "string")
    assert not accepts("199", [["1990"]], "string")


def test_string_gold_that_looks_wrapped_is_accepted_verbatim() -> None:
    assert accepts('"quoted"', [['"quoted"']], "string")
    assert accepts("Answer: yes", [["Answer: yes"]], "string")
    assert not accepts('"other"', [['"quoted"']], "string")


def test_string_gold_with_a_trailing_period_needs_it_or_not() -> None:
    assert accepts("St. Louis", [["St. Louis"]], "string")
    assert not accepts("St Louis", [["St. Louis"]], "string")


# ------------------------------------------------------------------------------------------ list

LIST_GOLD: Rows = [["a"], ["b"], ["c"]]

LIST_FORMATS_IN_GOLD_ORDER = {
    "json": '["a", "b", "c"]',
    "json-rows": '[["a"], ["b"], ["c"]]',
    "json-objects": '[{"x": "a"}, {"x": "b"}, {"x": "c"}]',
    "newlines": "a\nb\nc",
    "dash-bullets": "- a\n- b\n- c",
    "star-bullets": "* a\n* b\n* c",
    "numbered": "1. a\n2. b\n3. c",
    "comma": "a, b, c",
    "semicolon": "a; b; c",
    "pipe": "a | b | c",
    "quoted-comma": "'a', 'b', 'c'",
    "double-quoted-comma": '"a", "b", "c"',
    "quoted-lines": '"a"\n"b"\n"c"',
}

LIST_FORMATS_SHUFFLED = {
    "json": '["c", "a", "b"]',
    "json-rows": '[["b"], ["c"], ["a"]]',
    "json-objects": '[{"x": "c"}, {"x": "b"}, {"x": "a"}]',
    "newlines": "c\na\nb",
    "dash-bullets": "- b\n- a\n- c",
    "star-bullets": "* c\n* b\n* a",
    "numbered": "1. b\n2. c\n3. a",
    "comma": "c, b, a",
    "semicolon": "b;c;a",
    "pipe": "c | a | b",
    "quoted-comma": "'c', 'a', 'b'",
    "double-quoted-comma": '"b", "a", "c"',
    "quoted-lines": '"c"\n"a"\n"b"',
}


@pytest.mark.parametrize("fmt", sorted(LIST_FORMATS_IN_GOLD_ORDER))
@pytest.mark.parametrize("order_sensitive", [False, True])
def test_list_in_gold_order_is_accepted_in_every_format(fmt: str, order_sensitive: bool) -> None:
    assert accepts(LIST_FORMATS_IN_GOLD_ORDER[fmt], LIST_GOLD, "list", order_sensitive)


@pytest.mark.parametrize("fmt", sorted(LIST_FORMATS_SHUFFLED))
def test_list_in_another_order_is_accepted_only_without_order_by(fmt: str) -> None:
    answer = LIST_FORMATS_SHUFFLED[fmt]
    assert accepts(answer, LIST_GOLD, "list", order_sensitive=False)
    assert not accepts(answer, LIST_GOLD, "list", order_sensitive=True)


@pytest.mark.parametrize(
    "answer",
    [
        '["a", "b"]',  # a missing item
        "a, b",
        '["a", "b", "c", "d"]',  # an extra item
        "a\nb\nc\nd",
        '["a", "b", "c", "c"]',  # an extra duplicate
        '["a", "b", "x"]',  # a wrong item
        "a, b, x",
        "[]",
        "a",
    ],
)
@pytest.mark.parametrize("order_sensitive", [False, True])
def test_list_with_a_missing_extra_or_wrong_item_fails(answer: str, order_sensitive: bool) -> None:
    assert not accepts(answer, LIST_GOLD, "list", order_sensitive)


@pytest.mark.parametrize("order_sensitive", [False, True])
def test_list_is_a_multiset_duplicate_counts_matter(order_sensitive: bool) -> None:
    gold: Rows = [["a"], ["a"], ["b"]]
    assert accepts('["a", "a", "b"]', gold, "list", order_sensitive)
    assert not accepts('["a", "b", "b"]', gold, "list", order_sensitive)
    assert not accepts('["a", "b"]', gold, "list", order_sensitive)
    assert not accepts("a, a, b, b", gold, "list", order_sensitive)


def test_list_order_sensitivity_applies_to_duplicates_too() -> None:
    gold: Rows = [["a"], ["a"], ["b"]]
    assert accepts('["b", "a", "a"]', gold, "list", order_sensitive=False)
    assert not accepts('["b", "a", "a"]', gold, "list", order_sensitive=True)


def test_list_of_floats_uses_the_tolerance_per_item() -> None:
    gold: Rows = [[1.0], [2.5], [100.0]]
    assert accepts("[1.005, 2.52, 100.9]", gold, "list", order_sensitive=True)
    assert accepts("[100.9, 1.005, 2.52]", gold, "list", order_sensitive=False)
    assert not accepts("[100.9, 1.005, 2.52]", gold, "list", order_sensitive=True)
    assert accepts("1, 2.5, 100", gold, "list")
    assert not accepts("[1.02, 2.5, 100]", gold, "list")  # 2 % off on one item
    assert not accepts("[1, 2.5, 102]", gold, "list")


def test_list_of_close_floats_in_another_order_is_paired_correctly() -> None:
    # Each gold value is within 1 % of its neighbour: pairing greedily by first fit would pair
    # 100.0 with 100.9 and leave 101.8 with nothing.
    gold: Rows = [[100.0], [100.9], [101.8]]
    assert accepts("[100.9, 101.8, 100.0]", gold, "list")
    gold = [[100.0], [101.5]]
    assert accepts("[101.0, 100.1]", gold, "list")  # 101.0 fits both gold values, 100.1 only 100.0
    assert not accepts("[101.0, 100.1]", [[100.0], [102.5]], "list")


def test_list_of_integers_in_every_number_spelling() -> None:
    gold: Rows = [[1], [2], [3]]
    for answer in ("[1, 2, 3]", "[1.0, 2.0, 3.0]", '["1", "2", "3"]', "3\n2\n1", "1,2,3"):
        assert accepts(answer, gold, "list"), answer
    for answer in ("[1, 2, 4]", "[1, 2, 3.5]", "[1, 2]", '["1", "2", "x"]'):
        assert not accepts(answer, gold, "list"), answer


def test_list_of_numeric_strings_matches_numerically_like_a_string_scalar() -> None:
    gold: Rows = [["1.50"], ["2"]]
    assert accepts("1.5, 2", gold, "list")
    assert accepts("[2, 1.5]", gold, "list")
    assert not accepts("1.5, 3", gold, "list")


def test_list_values_containing_commas_need_a_json_array() -> None:
    gold: Rows = [["Smith, John"], ["Doe, Jane"]]
    assert accepts('["Smith, John", "Doe, Jane"]', gold, "list", order_sensitive=True)
    assert accepts('["Doe, Jane", "Smith, John"]', gold, "list", order_sensitive=False)
    assert not accepts('["Doe, Jane", "Smith, John"]', gold, "list", order_sensitive=True)
    assert accepts("Smith, John\nDoe, Jane", gold, "list")  # one per line works too
    assert not accepts('["Smith", "John", "Doe", "Jane"]', gold, "list")
    assert not accepts('["Smith, John", "Doe"]', gold, "list")


def test_list_is_case_insensitive_and_trimmed() -> None:
    assert accepts('["A", " b ", "C"]', LIST_GOLD, "list", order_sensitive=True)
    assert not accepts('["A", "bb", "C"]', LIST_GOLD, "list", order_sensitive=True)


# ----------------------------------------------------------------------------------------- table

TABLE_GOLD: Rows = [["Alice", 30], ["Bob", 25]]

TABLE_FORMATS_IN_GOLD_ORDER = {
    "json-arrays": '[["Alice", 30], ["Bob", 25]]',
    "json-objects": '[{"name": "Alice", "age": 30}, {"name": "Bob", "age": 25}]',
    "pipe-lines": "Alice | 30\nBob | 25",
    "markdown": "| name | age |\n|---|---|\n| Alice | 30 |\n| Bob | 25 |",
    "markdown-aligned": "| name | age |\n| :--- | ---: |\n| Alice | 30 |\n| Bob | 25 |",
    "tab-separated": "Alice\t30\nBob\t25",
    "comma-lines": "Alice, 30\nBob, 25",
    "comma-lines-with-header": "name, age\nAlice, 30\nBob, 25",
    "one-line-semicolons": "Alice, 30; Bob, 25",
    "one-line-tuples": "(Alice, 30), (Bob, 25)",
}

TABLE_FORMATS_SHUFFLED = {
    "json-arrays": '[["Bob", 25], ["Alice", 30]]',
    "json-objects": '[{"name": "Bob", "age": 25}, {"name": "Alice", "age": 30}]',
    "pipe-lines": "Bob | 25\nAlice | 30",
    "markdown": "| name | age |\n| --- | --- |\n| Bob | 25 |\n| Alice | 30 |",
    "tab-separated": "Bob\t25\nAlice\t30",
    "comma-lines": "Bob, 25\nAlice, 30",
    "one-line-semicolons": "Bob, 25; Alice, 30",
}


@pytest.mark.parametrize("fmt", sorted(TABLE_FORMATS_IN_GOLD_ORDER))
@pytest.mark.parametrize("order_sensitive", [False, True])
def test_table_in_gold_order_is_accepted_in_every_format(fmt: str, order_sensitive: bool) -> None:
    assert accepts(TABLE_FORMATS_IN_GOLD_ORDER[fmt], TABLE_GOLD, "table", order_sensitive)


@pytest.mark.parametrize("fmt", sorted(TABLE_FORMATS_SHUFFLED))
def test_table_rows_in_another_order_are_accepted_only_without_order_by(fmt: str) -> None:
    answer = TABLE_FORMATS_SHUFFLED[fmt]
    assert accepts(answer, TABLE_GOLD, "table", order_sensitive=False)
    assert not accepts(answer, TABLE_GOLD, "table", order_sensitive=True)


@pytest.mark.parametrize(
    "answer",
    [
        '[["Alice", 25], ["Bob", 30]]',  # a cell moved to another row
        '[[30, "Alice"], ["Bob", 25]]',  # two cells swapped within a row
        "Alice | 25\nBob | 30",
        '[["Alice", 30]]',  # a row missing
        '[["Alice", 30], ["Bob", 25], ["Bob", 25]]',  # an extra duplicate row
        '[["Alice", 30], ["Bob", 25], ["Carol", 41]]',  # an extra row
        '[["Alice", 30], ["Bob", 26]]',  # one wrong int
        '[["Alice", 30], ["Rob", 25]]',  # one wrong string
        '[["Alice", 30, 1], ["Bob", 25, 2]]',  # an extra column
        '["Alice", "Bob"]',  # a column missing
        "Alice\nBob",
    ],
)
@pytest.mark.parametrize("order_sensitive", [False, True])
def test_table_near_misses_fail(answer: str, order_sensitive: bool) -> None:
    assert not accepts(answer, TABLE_GOLD, "table", order_sensitive)


@pytest.mark.parametrize("order_sensitive", [False, True])
def test_table_is_a_multiset_of_rows(order_sensitive: bool) -> None:
    gold: Rows = [["a", 1], ["a", 1], ["b", 2]]
    assert accepts('[["a", 1], ["a", 1], ["b", 2]]', gold, "table", order_sensitive)
    assert not accepts('[["a", 1], ["b", 2], ["b", 2]]', gold, "table", order_sensitive)
    assert not accepts('[["a", 1], ["b", 2]]', gold, "table", order_sensitive)


def test_table_cells_are_compared_by_their_column_type() -> None:
    gold: Rows = [["x", 1, 2.0], ["y", 2, 100.0]]
    # The float column gets the 1 % tolerance, per cell, in any row order.
    assert accepts('[["x", 1, 2.01], ["y", 2, 100.9]]', gold, "table", order_sensitive=True)
    assert accepts('[["y", 2, 100.9], ["x", 1, 2.01]]', gold, "table", order_sensitive=False)
    assert not accepts('[["y", 2, 100.9], ["x", 1, 2.01]]', gold, "table", order_sensitive=True)
    assert not accepts('[["x", 1, 2.1], ["y", 2, 100.0]]', gold, "table")  # 5 % off
    # The int column is exact: the float column's tolerance does not leak into it.
    assert accepts('[["x", 1.0, 2], ["y", 2, 100]]', gold, "table")
    assert not accepts('[["x", 1, 2.0], ["y", 2.01, 100.0]]', gold, "table")
    assert not accepts('[["x", 1.5, 2.0], ["y", 2, 100.0]]', gold, "table")
    # The string column is case-insensitive and trimmed, and never numeric-tolerant.
    assert accepts('[[" X ", 1, 2.0], ["Y", 2, 100.0]]', gold, "table")
    assert not accepts('[["z", 1, 2.0], ["y", 2, 100.0]]', gold, "table")


def test_table_float_rows_close_to_each_other_in_another_order() -> None:
    gold: Rows = [["k", 100.0], ["k", 100.9], ["k", 101.8]]
    assert accepts("k | 100.9\nk | 101.8\nk | 100.0", gold, "table")
    assert not accepts("k | 100.9\nk | 101.8\nk | 103.0", gold, "table")


def test_table_string_cells_compare_numerically_when_both_are_numbers() -> None:
    gold: Rows = [["2019", "x"], ["2020", "y"]]
    assert accepts("[[2020, 'y'], [2019, 'x']]".replace("'", '"'), gold, "table")
    assert not accepts('[[2021, "y"], [2019, "x"]]', gold, "table")


@pytest.mark.parametrize("answer", ["Alice, 30", "Alice | 30", "Alice\t30", '["Alice", 30]', "Alice; 30"])
def test_single_row_table_may_be_given_flat(answer: str) -> None:
    assert accepts(answer, [["Alice", 30]], "table")


@pytest.mark.parametrize("answer", ["Alice, 31", "Bob, 30", "Alice", "Alice, 30, 1"])
def test_single_row_table_flat_near_misses_fail(answer: str) -> None:
    assert not accepts(answer, [["Alice", 30]], "table")


def test_table_cells_with_commas_or_pipes_in_json() -> None:
    gold: Rows = [["Smith, John", "a | b"], ["Doe, Jane", "c | d"]]
    assert accepts('[["Doe, Jane", "c | d"], ["Smith, John", "a | b"]]', gold, "table")
    assert not accepts('[["Doe, Jane", "a | b"], ["Smith, John", "c | d"]]', gold, "table")


# ----------------------------------------------------------------------------------- NULL cells


@pytest.mark.parametrize("answer", ["null", "NULL", "None", "none", ""])
def test_null_gold_scalar_accepts_null_words(answer: str) -> None:
    assert accepts(answer, [[None]], "string")
    assert accepts(answer, [[None]], "integer")


@pytest.mark.parametrize("answer", ["0", "x", "[1]", "no"])
def test_null_gold_scalar_rejects_a_value(answer: str) -> None:
    assert not accepts(answer, [[None]], "string")
    assert not accepts(answer, [[None]], "integer")


def test_a_value_gold_rejects_null_words() -> None:
    assert not accepts("null", [["x"]], "string")
    assert not accepts("None", [[0]], "integer")
    assert not accepts("null", [[0.0]], "float")


@pytest.mark.parametrize(
    "answer", ['["a", null, "b"]', "a, null, b", "a\nNone\nb", "a, , b", '["a", "NULL", "b"]']
)
def test_null_item_in_a_list(answer: str) -> None:
    assert accepts(answer, [["a"], [None], ["b"]], "list", order_sensitive=True)


@pytest.mark.parametrize("answer", ['["a", "x", "b"]', "a, 0, b", '["a", "b"]', '["a", null, null]'])
def test_null_item_in_a_list_near_misses(answer: str) -> None:
    assert not accepts(answer, [["a"], [None], ["b"]], "list")


@pytest.mark.parametrize(
    "answer",
    [
        '[["a", null], ["b", 3]]',
        "a | NULL\nb | 3",
        "a | None\nb | 3",
        "a | \nb | 3",  # an empty last cell, not a markdown border
        "| a | |\n| b | 3 |",
        "a, null\nb, 3",
        "a,\nb, 3",
        "a\t\nb\t3",  # a tab before the line end separates an empty cell
        '[["b", 3], ["a", ""]]',
    ],
)
def test_null_cell_in_a_table(answer: str) -> None:
    assert accepts(answer, [["a", None], ["b", 3]], "table")


def test_null_first_cell_in_a_table() -> None:
    gold: Rows = [[None, 1], ["b", 3]]
    assert accepts(" | 1\nb | 3", gold, "table")
    assert accepts("| | 1 |\n| b | 3 |", gold, "table")
    assert not accepts("x | 1\nb | 3", gold, "table")


@pytest.mark.parametrize("answer", ['[["a", 0], ["b", 3]]', "a | 0\nb | 3", '[["a", "x"], ["b", 3]]'])
def test_a_value_where_the_gold_cell_is_null_fails(answer: str) -> None:
    assert not accepts(answer, [["a", None], ["b", 3]], "table")


# ------------------------------------------------------------------------------------ empty gold

ALL_TYPES: tuple[AnswerType, ...] = ("integer", "float", "string", "list", "table")


@pytest.mark.parametrize(
    "answer", ["[]", "none", "None.", "No results", "no results.", "empty", "", "```json\n[]\n```"]
)
@pytest.mark.parametrize("answer_type", ALL_TYPES)
def test_empty_gold_accepts_an_explicit_no_rows_answer(answer: str, answer_type: AnswerType) -> None:
    assert accepts(answer, [], answer_type)
    assert is_empty_answer(answer)


@pytest.mark.parametrize("answer", ["0", "[1]", "[0]", "no", "a", '[["a", 1]]'])
@pytest.mark.parametrize("answer_type", ALL_TYPES)
def test_empty_gold_rejects_any_value(answer: str, answer_type: AnswerType) -> None:
    assert not accepts(answer, [], answer_type)
    assert not is_empty_answer(answer)


@pytest.mark.parametrize("answer", ["[]", "No results", ""])
def test_a_no_rows_answer_is_wrong_when_the_gold_has_rows(answer: str) -> None:
    assert not accepts(answer, [[1]], "integer")
    assert not accepts(answer, LIST_GOLD, "list")
    assert not accepts(answer, TABLE_GOLD, "table")


# ------------------------------------------------------------------------------ wrapped answers


@pytest.mark.parametrize(
    "answer",
    [
        "```\n42\n```",
        "```sql\n42\n```",
        "```json\n42\n```",
        "```json\n[42]\n```",
        "Answer: 42",
        "answer: 42",
        "ANSWER = 42",
        "Final answer: 42",
        "The answer is 42.",
        "'42'",
        '"42"',
        "`42`",
        '```\nAnswer: "42"\n```',
        "Final answer: ```sql\n42\n```",
        "Answer: '```\n42\n```'",
        '```json\nFinal answer: "42"\n```',
    ],
)
def test_wrapping_is_stripped_before_comparing(answer: str) -> None:
    assert accepts(answer, INTEGER_GOLD, "integer")
    assert not accepts(answer.replace("42", "43"), INTEGER_GOLD, "integer")


def test_wrapped_string_list_and_table() -> None:
    assert accepts("Final answer: 'Paris'", STRING_GOLD, "string")
    assert not accepts("Final answer: 'Lyon'", STRING_GOLD, "string")
    assert accepts('```json\n["c", "a", "b"]\n```', LIST_GOLD, "list")
    assert not accepts('```json\n["c", "a", "x"]\n```', LIST_GOLD, "list")
    assert accepts("Answer: ```\na\nb\nc\n```", LIST_GOLD, "list", order_sensitive=True)
    assert accepts('Answer: ```json\n[["Alice", 30], ["Bob", 25]]\n```', TABLE_GOLD, "table")
    assert not accepts('Answer: ```json\n[["Alice", 30], ["Bob", 24]]\n```', TABLE_GOLD, "table")


def test_values_that_start_like_a_prefix_are_not_eaten() -> None:
    gold: Rows = [["Answer", 0], ["A", 1]]
    assert accepts("Answer | 0\nA | 1", gold, "table", order_sensitive=True)
    assert not accepts("Answer | 1\nA | 0", gold, "table")
    assert accepts("Answer, b", [["Answer"], ["b"]], "list", order_sensitive=True)
    assert not accepts("Answer, c", [["Answer"], ["b"]], "list")


@pytest.mark.parametrize(
    ("wrapped", "inner"),
    [
        ("```sql\nSELECT 1\n```", "SELECT 1"),
        ("```json\n[1, 2]\n```", "[1, 2]"),
        ("Answer: x", "x"),
        ("Final answer: x", "x"),
        ("  'x'  ", "x"),
        ('"x"', "x"),
        ('```\nAnswer: "x"\n```', "x"),
        ("Final answer: ```sql\nSELECT 1\n```", "SELECT 1"),
        ("'O'Brien'", "O'Brien"),
        ("'a', 'b'", "'a', 'b'"),  # quotes of two items, not one quote around the whole
        ('"a"\n"b"', '"a"\n"b"'),
        ("x", "x"),
        ("", ""),
    ],
)
def test_strip_wrapping(wrapped: str, inner: str) -> None:
    assert strip_wrapping(wrapped) == inner


# ------------------------------------------------------------------------------- building blocks


@pytest.mark.parametrize(
    ("token", "number"),
    [
        ("42", 42),
        (" 42 ", 42),
        ("42.", 42),
        ("-3.5", -3.5),
        ("1,234", 1234),
        ("1,234.5", 1234.5),
        ("1e3", 1000.0),
        (7, 7),
        (2.5, 2.5),
    ],
)
def test_parse_number_reads_numbers(token: Cell, number: float) -> None:
    parsed = parse_number(token)
    assert parsed == number
    assert type(parsed) is type(number)


@pytest.mark.parametrize("token", ["abc", "", "1,23", "12,34,567", "nan", "inf", None, True, float("nan")])
def test_parse_number_rejects_non_numbers(token: Cell) -> None:
    assert parse_number(token) is None


def test_cell_matches_by_gold_type() -> None:
    assert cell_matches("7", 7, 0.01)
    assert not cell_matches("7.01", 7, 0.01)
    assert cell_matches("7.05", 7.0, 0.01)
    assert not cell_matches("7.1", 7.0, 0.01)
    assert cell_matches(" ABC ", "abc", 0.01)
    assert not cell_matches("abd", "abc", 0.01)
    assert cell_matches("null", None, 0.01)
    assert cell_matches(None, None, 0.01)
    assert not cell_matches(None, "x", 0.01)
    assert not cell_matches("0", None, 0.01)


def test_rows_equal_unordered_is_a_multiset_comparison() -> None:
    gold: Rows = [["a", 1.0], ["b", 2.0], ["b", 2.0]]
    assert rows_equal_unordered([["b", 2.0], ["a", 1.0], ["b", 2.0]], gold)
    assert rows_equal_unordered([["b", 2.01], ["a", 1.0], ["b", 1.99]], gold)
    assert not rows_equal_unordered([["a", 1.0], ["a", 1.0], ["b", 2.0]], gold)
    assert not rows_equal_unordered([["a", 1.0], ["b", 2.0]], gold)
    assert not rows_equal_unordered([["a", 1.0, 0], ["b", 2.0, 0], ["b", 2.0, 0]], gold)
    assert rows_equal_unordered([], [])


def test_rows_equal_unordered_on_a_large_float_result() -> None:
    gold: Rows = [[i, i / 7] for i in range(5000)]
    shuffled = gold[::-1]
    assert rows_equal_unordered(shuffled, gold)
    assert not rows_equal_unordered([*shuffled[:-1], [0, 1e9]], gold)


def test_verdict_says_why() -> None:
    right = verify_answer("42", INTEGER_GOLD, "integer", False)
    wrong = verify_answer("43", INTEGER_GOLD, "integer", False)
    assert isinstance(right, Verdict)
    assert (right.correct, wrong.correct) == (True, False)
    assert right.reason.startswith("correct")
    assert wrong.reason.startswith("wrong")


def test_a_non_text_answer_is_wrong() -> None:
    assert not verify_answer(42, INTEGER_GOLD, "integer", False).correct  # type: ignore[arg-type]


# ------------------------------------------------------------------------ format_answer round trip

ROUND_TRIP_EXAMPLES: list[tuple[Rows, AnswerType]] = [
    ([[42]], "integer"),
    ([[-7]], "integer"),
    ([[3.25]], "float"),
    ([[-0.001]], "float"),
    ([[1e20]], "float"),
    ([["Paris"]], "string"),
    ([['say "hi"']], "string"),
    ([["Answer: yes"]], "string"),
    ([[None]], "string"),
    ([["a, b"], ["c | d"], [None], ["Ünïcödé"]], "list"),
    ([[1.5], [-2.25], [1e12]], "list"),
    ([["Alice", 30, 1.5], ["Bob", None, -2.0], ["O'Brien, Jr.", 7, 0.0]], "table"),
    ([], "table"),
    ([], "integer"),
]


@pytest.mark.parametrize(("rows", "answer_type"), ROUND_TRIP_EXAMPLES)
@pytest.mark.parametrize("order_sensitive", [False, True])
def test_format_answer_round_trips(rows: Rows, answer_type: AnswerType, order_sensitive: bool) -> None:
    assert accepts(format_answer(rows, answer_type), rows, answer_type, order_sensitive)


def test_format_answer_writes_scalars_as_text_and_collections_as_json() -> None:
    assert format_answer([[42]], "integer") == "42"
    assert format_answer([["Paris"]], "string") == "Paris"
    assert format_answer([[None]], "string") == "NULL"
    assert json.loads(format_answer([["a"], ["b"]], "list")) == ["a", "b"]
    assert json.loads(format_answer([["a", 1], ["b", None]], "table")) == [["a", 1], ["b", None]]
    assert format_answer([], "list") == "[]"


# ------------------------------------------------------------------------------ property tests

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)

TRICKY_STRINGS = [
    "a, b",
    'say "hi"',
    "it's",
    "a | b",
    "x\ty",
    "line\nbreak",
    "Ünïcödé ✓",
    "[1]",
    "null",
    " ",
    "'quoted'",
    "Answer: yes",
    "1,234",
    "007",
]

COLUMN_VALUES = {
    "int": st.integers(min_value=-(10**18), max_value=10**18),
    "float": st.floats(
        min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False, allow_subnormal=False
    ),
    "str": st.one_of(st.text(max_size=12), st.sampled_from(TRICKY_STRINGS)),
}


@st.composite
def gold_tables(draw: st.DrawFn) -> tuple[Rows, AnswerType]:
    """Gold rows of one of the three shapes (1x1, Nx1, NxM), one cell type per column, NULLs allowed."""
    shape = draw(st.sampled_from(["1x1", "Nx1", "NxM"]))
    n_rows = 1 if shape == "1x1" else draw(st.integers(min_value=1, max_value=6))
    width = draw(st.integers(min_value=2, max_value=4)) if shape == "NxM" else 1
    kinds = [draw(st.sampled_from(sorted(COLUMN_VALUES))) for _ in range(width)]
    cell = {k: st.one_of(st.none(), v) if draw(st.booleans()) else v for k, v in COLUMN_VALUES.items()}
    rows = [[draw(cell[k]) for k in kinds] for _ in range(n_rows)]
    answer_type = infer_answer_type(tuple(tuple(r) for r in rows), width)
    if shape == "Nx1" and n_rows == 1:
        answer_type = draw(st.sampled_from([answer_type, "list"]))
    return rows, answer_type


def clearly_different(value: Cell) -> Cell:
    if value is None:
        return "changed"
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        # Values within 1e-9 of zero all count as zero, so move those well away from it.
        return value * 1.5 if abs(value) >= 1e-9 else value + 1.0
    return value + "_x"


@PROPERTY_SETTINGS
@given(gold=gold_tables(), order_sensitive=st.booleans())
def test_property_the_formatted_gold_is_accepted(
    gold: tuple[Rows, AnswerType], order_sensitive: bool
) -> None:
    rows, answer_type = gold
    assert accepts(format_answer(rows, answer_type), rows, answer_type, order_sensitive)


@PROPERTY_SETTINGS
@given(gold=gold_tables(), data=st.data())
def test_property_shuffled_gold_is_accepted_without_order_by(
    gold: tuple[Rows, AnswerType], data: st.DataObject
) -> None:
    rows, answer_type = gold
    shuffled = data.draw(st.permutations(rows))
    assert accepts(format_answer(shuffled, answer_type), rows, answer_type, order_sensitive=False)


@PROPERTY_SETTINGS
@given(gold=gold_tables(), order_sensitive=st.booleans(), data=st.data())
def test_property_one_changed_cell_is_rejected(
    gold: tuple[Rows, AnswerType], order_sensitive: bool, data: st.DataObject
) -> None:
    rows, answer_type = gold
    i = data.draw(st.integers(min_value=0, max_value=len(rows) - 1))
    j = data.draw(st.integers(min_value=0, max_value=len(rows[0]) - 1))
    changed = [list(r) for r in rows]
    changed[i][j] = clearly_different(rows[i][j])
    answer = format_answer(changed, answer_type)
    assert not accepts(answer, rows, answer_type, order_sensitive)
    if not order_sensitive:
        shuffled = data.draw(st.permutations(changed))
        assert not accepts(format_answer(shuffled, answer_type), rows, answer_type, order_sensitive)


@PROPERTY_SETTINGS
@given(values=st.lists(st.integers(-1000, 1000), min_size=2, max_size=8, unique=True))
def test_property_another_order_fails_only_with_order_by(values: list[int]) -> None:
    gold: Rows = [[v] for v in values]
    answer = json.dumps(values[::-1])
    assert accepts(answer, gold, "list", order_sensitive=False)
    assert not accepts(answer, gold, "list", order_sensitive=True)


WORDS = st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=10).map(str.strip).filter(bool)


@PROPERTY_SETTINGS
@given(
    items=st.lists(WORDS, min_size=1, max_size=6),
    separator=st.sampled_from(["\n", ", ", "; ", "\n- "]),
    seed=st.integers(0, 2**16),
)
def test_property_plain_text_lists_in_any_order(items: list[str], separator: str, seed: int) -> None:
    gold: Rows = [[item] for item in items]
    shuffled = items[:]
    random.Random(seed).shuffle(shuffled)
    prefix = "- " if separator == "\n- " else ""
    assert accepts(prefix + separator.join(shuffled), gold, "list", order_sensitive=False)
    wrong = [*shuffled[:-1], shuffled[-1] + "zz"]
    assert not accepts(prefix + separator.join(wrong), gold, "list", order_sensitive=False)


@PROPERTY_SETTINGS
@given(
    rows=st.lists(st.tuples(WORDS, st.integers(-999, 999)), min_size=1, max_size=6),
    separator=st.sampled_from([" | ", "\t", ", "]),
    seed=st.integers(0, 2**16),
)
def test_property_plain_text_tables_in_any_order(
    rows: list[tuple[str, int]], separator: str, seed: int
) -> None:
    gold: Rows = [[name, number] for name, number in rows]
    shuffled = gold[:]
    random.Random(seed).shuffle(shuffled)
    assert accepts("\n".join(f"{a}{separator}{b}" for a, b in shuffled), gold, "table", order_sensitive=False)
    shuffled[0] = [shuffled[0][0], shuffled[0][1] + 1]  # type: ignore[operator]
    assert not accepts(
        "\n".join(f"{a}{separator}{b}" for a, b in shuffled), gold, "table", order_sensitive=False
    )


def test_float_gold_that_is_a_rounding_residue_of_zero_accepts_zero() -> None:
    assert verify_answer("0", [[5.551115123125783e-17]], "float", False).correct
    assert not verify_answer("0.001", [[5.551115123125783e-17]], "float", False).correct


@pytest.mark.parametrize(
    ("answer", "answer_type", "gold", "reason"),
    [
        ("0", "integer", 122, "wrong: not the expected integer value"),
        ("Answer: 7", "integer", 3, "wrong: not the expected integer value"),
        ("2.5", "float", 1.5, "wrong: not the expected float value"),
        ("France", "string", "Spain", "wrong: not the expected string value"),
        ('["France"]', "string", "Spain", "wrong: not the expected string value"),
        ("[1, 2]", "integer", 1, "wrong: expected a single integer value"),
        ("many", "integer", 1, "wrong: expected a single integer value"),
        ('["France", "Spain"]', "string", "Spain", "wrong: expected a single string value"),
    ],
)
def test_a_wrong_scalar_says_whether_its_shape_was_right(
    answer: str, answer_type: AnswerType, gold: Cell, reason: str
) -> None:
    """An integer answer to an integer question is told it is another value, not that the question
    wanted an integer; neither message gives the gold away."""
    verdict = verify_answer(answer, [[gold]], answer_type, False)
    assert not verdict.correct and verdict.reason == reason and str(gold) not in reason


@pytest.mark.parametrize(
    ("answer", "answer_type", "gold", "order_sensitive", "reason"),
    [
        ('["a", "b"]', "list", [["x"]], False, "wrong: expected a list of 1 value in any order"),
        ('["a"]', "list", [["x"], ["y"], ["z"]], True, "wrong: expected a list of 3 values in order"),
        ('[["a", 1]]', "table", [["x", 1], ["y", 2]], False, "wrong: expected 2 rows of 2 columns"),
        ('[["a", 1], ["b", 2]]', "table", [["x", 1]], False, "wrong: expected 1 row of 2 columns"),
    ],
)
def test_a_wrong_list_or_table_names_the_expected_shape(
    answer: str, answer_type: AnswerType, gold: list[list[Cell]], order_sensitive: bool, reason: str
) -> None:
    verdict = verify_answer(answer, gold, answer_type, order_sensitive)
    assert not verdict.correct and verdict.reason == reason
