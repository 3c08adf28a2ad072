"""Code extraction from model answers: the last Python fenced block, or a configured tag."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from envs.code.extract import extract_code, fenced


def test_last_python_or_bare_block_wins():
    text = "First:\n```python\nprint(1)\n```\nthen\n```\nprint(2)\n```\nand shell\n```bash\nls\n```\n"
    assert extract_code(text) == "print(2)\n"  # the bash block is not Python; the bare one is the last Python block


def test_missing_or_unclosed_block_is_none():
    assert extract_code("def f(): return 1") is None
    assert extract_code("```python\nprint(1)\n") is None  # cut off by a length limit
    assert extract_code("```python\n\n```") is None  # only whitespace


def test_think_blocks_are_ignored():
    text = "<think>maybe\n```python\nprint('draft')\n```\n</think>\n```python\nprint('final')\n```"
    assert extract_code(text) == "print('final')\n"
    assert extract_code("```python\nprint(1)\n```<think>```python\nprint(2)\n```") == "print(1)\n"


def test_longer_fences_hold_inner_backticks():
    text = "````python\ns = '```'\nprint(s)\n````"
    assert extract_code(text) == "s = '```'\nprint(s)\n"


def test_tag_mode_reads_the_last_tag_block():
    assert extract_code("<answer>x = 1</answer>", tag="answer") == "x = 1\n"
    assert extract_code("```python\nx = 1\n```", tag="answer") is None
    inner = "<answer>```python\ny = 2\n```</answer> <answer>```py\nz = 3\n```</answer>"
    assert extract_code(inner, tag="answer") == "z = 3\n"
    assert extract_code("<answer>\nw = 4\n", tag="answer") == "w = 4\n"  # unclosed: to the end


@given(st.text(alphabet=st.characters(blacklist_characters="`\r", blacklist_categories=("Cs",))).filter(str.strip))
def test_fenced_code_round_trips(code):
    # Any code without backticks survives fenced() -> extract_code() up to surrounding newlines.
    got = extract_code("Here you go:\n" + fenced(code) + "\nDone.")
    assert got == code.strip("\n") + "\n"


def test_hostile_inputs_give_none():
    # Pairs of bare fences make empty blocks and the last fence stays open: no program anywhere.
    for text in ["`" * 100_000, "```\n" * 10_001, "<answer>" * 50_000, "A" * 2_000_000]:
        assert extract_code(text) is None
    assert extract_code("<answer>" * 50_000, tag="answer") is None
