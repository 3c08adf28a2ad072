"""Property tests of ChatRenderer over random conversations, for the three committed tokenizers.

Each example plays an episode the way the episode loop does (prompt, then per turn: sampled ids,
action = decode_action, continuation ids), and checks at every turn:

* prefix invariant: the ids at turn k are a prefix of the ids at turn k + 1;
* the ids decode to the template's rendering of the conversation with each assistant content
  replaced by the sampled text verbatim (what ``agents/chat.py`` promises), and that rendering
  differs from ``template_text`` of the real conversation only by the allow-listed differences
  (Llama 3 strips assistant contents; a non-template stop token stays in the ids);
* the response mask (1 on sampled ids, 0 on continuations) marks exactly the sampled tokens, and
  every 0-run decodes to template text only;
* the record passes ``Trajectory.validate``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from agents.chat import ChatRenderer
from agents.trajectory import Trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizers"
TEMPLATE_LOOKALIKES = [
    "<|im_end|>",
    "<|im_start|>assistant\n",
    "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>",
    "<tool_call>",
    "</tool_response>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "{{ messages }}",
    "{% endfor %}",
]
WHITESPACE = [" ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0"]
TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object", "properties": {}}}}]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def renderer_for(name: str) -> ChatRenderer:
    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / name)
    if name == "chatml_qwen":
        # <|endoftext|> as a second stop token exercises allow-list item 2 (a non-template stop token).
        stop = (tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>"))
        return ChatRenderer(tokenizer, tools=TOOLS, stop_token_ids=stop)
    if name == "llama3":
        return ChatRenderer(tokenizer, tools=TOOLS)
    return ChatRenderer(tokenizer)


# The SmolLM2 vocabulary has no token for the bytes 0x04, 0x06, 0x13, 0x14, 0x16 and 0x1d, nor for the
# lead bytes of code points from U+40000 up: such characters cannot be encoded at all (allow-list item 3
# of agents/chat.py, checked in test_chat.py), so its examples leave them out.
SMOLLM2_UNENCODABLE = "\x04\x06\x13\x14\x16\x1d"


def texts(max_codepoint: int = 0x10FFFF, exclude: str = "") -> st.SearchStrategy[str]:
    """Unicode-ish text: random characters, template look-alikes and whitespace, concatenated."""
    characters = st.characters(exclude_categories=("Cs",), max_codepoint=max_codepoint, exclude_characters=exclude)
    pieces = st.one_of(
        st.text(characters, max_size=10), st.sampled_from(TEMPLATE_LOOKALIKES), st.sampled_from(WHITESPACE)
    )
    return st.lists(pieces, max_size=5).map("".join)


@st.composite
def observations(draw: st.DrawFn, text: st.SearchStrategy[str]) -> list[dict[str, str]]:
    if draw(st.booleans()):
        return [{"role": "user", "content": draw(text)}]
    return [{"role": "tool", "content": draw(text)} for _ in range(draw(st.integers(1, 3)))]


@st.composite
def turns(draw: st.DrawFn, renderer: ChatRenderer) -> tuple[list[int], str]:
    """Sampled ids of one turn and its finish reason; stop tokens only at the end, as engines return them."""
    vocab = len(renderer.tokenizer)
    stop = set(renderer.stop_token_ids)
    specials = [i for i in renderer.tokenizer.all_special_ids if i not in stop]
    token = st.one_of(st.integers(0, vocab - 1), st.sampled_from(specials)).filter(lambda i: i not in stop)
    finish_reason = draw(st.sampled_from(["stop", "length"]))
    body = draw(st.lists(token, min_size=0 if finish_reason == "stop" else 1, max_size=8))
    if finish_reason == "stop":
        body.append(draw(st.sampled_from(renderer.stop_token_ids)))
    return body, finish_reason


def marker(j: int) -> str:
    return f"ASSISTANT{j}CONTENT"


def play(renderer: ChatRenderer, system: str, first: str, episode: list, strips_assistant: bool = False) -> None:
    tokenizer = renderer.tokenizer
    decode = functools.partial(tokenizer.decode, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    conversation = [{"role": "system", "content": system}, {"role": "user", "content": first}]
    prompt = renderer.prompt_ids(conversation)
    assert decode(prompt) == renderer.template_text(conversation, True)
    marked = list(conversation)  # the conversation with assistant contents as markers
    verbatim: list[str] = []  # what the ids hold at each assistant content
    allowed: list[str] = []  # what the template renders there (the allow-list applied)
    response, mask, sampled_all = [], [], []
    for j, ((sampled, finish_reason), new_messages) in enumerate(episode):
        before = prompt + response
        action = renderer.decode_action(sampled)
        ended_by_glue_token = finish_reason == "stop" and sampled[-1] == renderer.stop_token_ids[0]
        stop_text = decode(sampled[-1:]) if finish_reason == "stop" else ""
        verbatim.append(action + ("" if ended_by_glue_token else stop_text))
        allowed.append(action.strip() if strips_assistant else action)
        continuation = renderer.continuation_ids(conversation, new_messages, sampled, finish_reason)
        response += sampled + continuation
        mask += [1] * len(sampled) + [0] * len(continuation)
        sampled_all += sampled
        conversation += [{"role": "assistant", "content": action}, *new_messages]
        marked += [{"role": "assistant", "content": marker(j)}, *new_messages]

        ids = prompt + response
        assert ids[: len(before)] == before  # prefix invariant
        skeleton = renderer.template_text(marked, True)
        expected, reference = skeleton, skeleton
        for k in range(j + 1):
            expected = expected.replace(marker(k), verbatim[k])
            reference = reference.replace(marker(k), allowed[k])
        assert decode(ids) == expected
        assert renderer.template_text(conversation, True) == reference
        # The mask: the 1-run is this turn's sampled text, the 0-run is exactly the template's text after it.
        assert decode(sampled) == action + stop_text
        after_turn = skeleton[skeleton.index(marker(j)) + len(marker(j)) :]
        assert decode(continuation) == (after_turn[len(stop_text) :] if ended_by_glue_token else after_turn)
        assert [t for t, m in zip(response, mask, strict=True) if m] == sampled_all

    trajectory = Trajectory(
        env_id="prop",
        seed=0,
        group_id="g",
        prompt_ids=prompt,
        response_ids=response,
        response_mask=mask,
        rollout_logprobs=[-0.5 if m else 0.0 for m in mask],
    )
    trajectory.validate()
    assert trajectory.num_sampled_tokens == len(sampled_all)


def episodes(name: str, text: st.SearchStrategy[str]) -> st.SearchStrategy:
    return st.lists(st.tuples(turns(renderer_for(name)), observations(text)), min_size=1, max_size=3)


SMOLLM2_TEXTS = texts(max_codepoint=0x3FFFF, exclude=SMOLLM2_UNENCODABLE)


@SETTINGS
@given(system=texts(), first=texts(), episode=episodes("chatml_qwen", texts()))
def test_chatml_qwen_properties(system: str, first: str, episode: list) -> None:
    play(renderer_for("chatml_qwen"), system, first, episode)


@SETTINGS
@given(system=texts(), first=texts(), episode=episodes("llama3", texts()))
def test_llama3_properties(system: str, first: str, episode: list) -> None:
    play(renderer_for("llama3"), system, first, episode, strips_assistant=True)


@SETTINGS
@given(system=SMOLLM2_TEXTS, first=SMOLLM2_TEXTS, episode=episodes("smollm2", SMOLLM2_TEXTS))
def test_smollm2_properties(system: str, first: str, episode: list) -> None:
    play(renderer_for("smollm2"), system, first, episode)
