"""The comparator itself: each rule of compat_compare must be able to fail.

Records are made by hand (with compat_record.describe, as a child process makes them), so no
DALI is needed: a comparator that passed everything would pass the whole suite too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from compat_compare import compare_records
from compat_record import describe, describe_error
from compat_registry import Case

DALI, LITE = "nvidia.dali", "dali_lite"
CASE = Case("harness.example", "compat_cases_none", "example")


class TensorLayout(str):
    """Stands for DALI's layout class: a str subclass that a program can tell from a str."""


class DALIError(RuntimeError):
    pass


def observed(label: str, value: Any, root: str, words: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"label": label, "value": describe(value, root), "words": list(words)}


def expected(label: str, value: Any, want: Any, root: str) -> dict[str, Any]:
    got, wanted = describe(value, root), describe(want, root)
    return {"label": label, "value": got, "expected": wanted, "meets": got == wanted}


def run(root: str, *records: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"root": root, "case": CASE.name, "records": list(records), "leftover_children": [],
            "leftover_shared_memory": [], "new_dev_shm": [], "output": "", **extra}


def compare(dali_value: Any, lite_value: Any, words: tuple[str, ...] = (),
            case: Case = CASE) -> list[str]:
    return compare_records(case, run(DALI, observed("x", dali_value, DALI, words)),
                           run(LITE, observed("x", lite_value, LITE, words)))


@pytest.mark.parametrize(("dali_value", "lite_value"), [
    (TensorLayout("HWC"), "HWC"),
    (np.int64(1), 1),
    (1, True),
    (1.0, 1),
    ([1, 2], (1, 2)),
    ({"a": 1}, {"a": 1.0}),
    (np.zeros(3, np.float32), np.zeros(3, np.float64)),
    (np.zeros(3, np.uint8), np.array([0, 0, 1], np.uint8)),
    (np.zeros((2, 3)), np.zeros((3, 2))),
    (b"ab", "ab"),
], ids=["layout-str", "int64-int", "int-bool", "float-int", "list-tuple", "dict-values",
        "dtype", "bytes", "shape", "bytes-str"])
def test_values_a_program_can_tell_apart_differ(dali_value: Any, lite_value: Any) -> None:
    assert compare(dali_value, lite_value)


@pytest.mark.parametrize("value", [
    "HWC", 1, 1.5, float("nan"), [1, (2, 3)], {"k": [1]}, np.arange(6).reshape(2, 3),
    np.arange(1000), None,
], ids=["str", "int", "float", "nan", "nested", "dict", "array", "large-array", "none"])
def test_equal_values_pass(value: Any) -> None:
    assert compare(value, value) == []


def test_large_arrays_that_differ_in_one_byte_differ() -> None:
    a = np.arange(1000, dtype=np.int32)
    b = a.copy()
    b[999] += 1
    assert compare(a, b)


def test_an_error_of_another_class_differs() -> None:
    problems = compare(RuntimeError("bad batch size"), ValueError("bad batch size"),
                       words=("batch size",))
    assert any("not a subclass" in p for p in problems)


def test_a_subclass_of_dalis_class_passes() -> None:
    from dali_lite._src.errors import RuntimeValueError

    assert compare(RuntimeError("bad batch size"), RuntimeValueError("bad batch size"),
                   words=("batch size",)) == []


def test_dalis_own_class_is_matched_by_name() -> None:
    class Mine(DALIError):
        pass

    assert compare(DALIError("no data"), Mine("no data"), words=("no data",)) == []
    assert compare(DALIError("no data"), RuntimeError("no data"), words=("no data",))


def test_a_message_missing_a_word_differs() -> None:
    problems = compare(TypeError("unexpected keyword argument 'foo'"),
                       TypeError("bad argument"), words=("unexpected keyword", "foo"))
    assert any("dali_lite's message lacks" in p for p in problems)


def test_a_word_dali_does_not_say_is_a_defect_of_the_case() -> None:
    problems = compare(TypeError("x"), TypeError("x words"), words=("words",))
    assert any("DALI's message lacks" in p for p in problems)


def test_a_dali_error_without_words_is_a_defect_of_the_case() -> None:
    problems = compare(TypeError("x"), TypeError("x"))
    assert any("names no essential words" in p for p in problems)


def test_a_result_where_dali_raised_differs() -> None:
    assert compare(RuntimeError("mixing"), None, words=("mixing",))


def test_an_error_where_dali_returned_differs() -> None:
    assert compare(None, RuntimeError("x"))
    assert describe(RuntimeError("x"), LITE) == describe_error(RuntimeError("x"), LITE)


def test_different_observations_differ() -> None:
    problems = compare_records(CASE, run(DALI, observed("a", 1, DALI)),
                               run(LITE, observed("b", 1, LITE)))
    assert any("observed different things" in p for p in problems)


@pytest.mark.parametrize("leftover", [
    {"leftover_children": ["4711"]},
    {"leftover_shared_memory": ["mapped /memfd:slot (deleted)"]},
    {"new_dev_shm": ["psm_1234"]},
    {"crash": "Traceback ...\nRuntimeError: boom"},
], ids=["child-process", "shared-memory", "dev-shm", "crash"])
def test_what_a_case_leaves_behind_fails_it(leftover: dict[str, Any]) -> None:
    problems = compare_records(CASE, run(DALI, observed("x", 1, DALI)),
                               run(LITE, observed("x", 1, LITE), **leftover))
    assert problems


def test_a_differs_case_where_dali_no_longer_differs_fails() -> None:
    case = Case("harness.differs", "compat_cases_none", "example", differs="some-anchor")
    problems = compare_records(case, run(DALI, expected("x", 2, 2, DALI)),
                               run(LITE, expected("x", 2, 2, LITE)))
    assert any("is gone" in p for p in problems)


def test_a_differs_case_passes_while_dali_differs_and_dali_lite_is_right() -> None:
    case = Case("harness.differs", "compat_cases_none", "example", differs="some-anchor")
    assert compare_records(case, run(DALI, expected("x", 1, 2, DALI)),
                           run(LITE, expected("x", 2, 2, LITE))) == []


def test_a_differs_case_fails_where_dali_lite_is_wrong_too() -> None:
    case = Case("harness.differs", "compat_cases_none", "example", differs="some-anchor")
    problems = compare_records(case, run(DALI, expected("x", 1, 2, DALI)),
                               run(LITE, expected("x", 3, 2, LITE)))
    assert any("dali_lite gave" in p for p in problems)


def test_a_differs_case_without_expectations_fails() -> None:
    case = Case("harness.differs", "compat_cases_none", "example", differs="some-anchor")
    problems = compare_records(case, run(DALI, observed("x", 1, DALI)),
                               run(LITE, observed("x", 1, LITE)))
    assert any("must state what is right" in p for p in problems)


def test_an_unmet_expectation_of_an_ordinary_case_fails() -> None:
    problems = compare_records(CASE, run(DALI, expected("x", 1, 2, DALI)),
                               run(LITE, expected("x", 1, 2, LITE)))
    assert len(problems) == 2


def test_library_objects_compare_by_str_with_addresses_and_root_neutral() -> None:
    class Obj:
        def __init__(self, root: str) -> None:
            self.root = root

        def __str__(self) -> str:
            return f"<{self.root}.pipeline.Pipeline object at 0x{id(self):x}>"

    assert compare_records(CASE, run(DALI, observed("p", Obj(DALI), DALI)),
                           run(LITE, observed("p", Obj(LITE), LITE))) == []
