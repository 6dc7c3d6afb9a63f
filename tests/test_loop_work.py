"""The one rule of what an event loop does itself: small work stays, large work and images leave."""

from __future__ import annotations

import pytest

from poolrag.loop_work import stays_on_loop


def test_a_one_text_request_is_done_on_the_loop() -> None:
    assert stays_on_loop()
    assert stays_on_loop(body_bytes=1_100)  # {"input": "<a 1,000-character passage>"}
    assert stays_on_loop(text_chars=1_000, texts=1)
    assert stays_on_loop(answer_values=1_024)  # one vector of a large model


@pytest.mark.parametrize(
    "work",
    [
        {"body_bytes": 16 << 20},  # a 16 MB body
        {"text_chars": 100_000, "texts": 1},
        {"texts": 64},  # many short inputs
        {"answer_values": 64 * 1_024},
        {"images": 1},  # decoding one takes milliseconds
    ],
    ids=str,
)
def test_large_work_and_any_image_leave_the_loop(work: dict[str, int]) -> None:
    assert not stays_on_loop(**work)


def test_more_work_never_brings_work_back_onto_the_loop() -> None:
    for unit in ("body_bytes", "text_chars", "texts", "answer_values"):
        verdicts = [stays_on_loop(**{unit: size}) for size in (0, 10, 100, 1_000, 10_000, 100_000, 1_000_000)]
        assert verdicts == sorted(verdicts, reverse=True) and verdicts[0] and not verdicts[-1], unit
