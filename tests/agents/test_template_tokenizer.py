"""TemplateTokenizer against the transformers tokenizer it stands in for, on the committed tokenizers and the embedded
SmolLM2: the same renderings, ids and texts (hand-checked, then over random conversations and texts), the same
ChatRenderer results, clear refusals, and an environment actor's renderer that never imports torch."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoTokenizer

from agents import models as agent_models
from agents.chat import ChatRenderer, ChatTemplateError
from agents.models import TINY_TOKENIZER_DIR, load_template_tokenizer, smollm2_path
from agents.template_tokenizer import TemplateTokenizer, builds_like_transformers
from tests.agents.test_chat_properties import texts

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "tokenizers"
CHATML = FIXTURES / "chatml_qwen"
NAMES = ["chatml_qwen", "llama3", "smollm2_fixture", "tiny", "smollm2"]
TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object", "properties": {}}}}]
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def directory(name: str) -> Path:
    if name == "smollm2":
        return smollm2_path()  # the embedded model's own directory: chat_template.jinja, TokenizersBackend class
    if name == "tiny":
        return TINY_TOKENIZER_DIR
    return FIXTURES / name.removesuffix("_fixture")


@functools.cache
def tokenizers_of(name: str) -> tuple[Any, TemplateTokenizer]:
    """(the transformers tokenizer, the TemplateTokenizer) of one directory."""
    return AutoTokenizer.from_pretrained(directory(name)), TemplateTokenizer.from_directory(directory(name))


@functools.cache
def renderers_of(name: str) -> tuple[ChatRenderer, ChatRenderer]:
    tools = TOOLS if name in ("chatml_qwen", "llama3") else None
    return tuple(ChatRenderer(tokenizer, tools=tools) for tokenizer in tokenizers_of(name))


def outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    """What ``call(*args, **kwargs)`` returns, or the type of what it raises: both sides must fail alike (a template's
    own error says the same on both; the refusals here are worded differently, hence the type only)."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        return type(exc)


def tokenizer_dir(tmp_path: Path, config: dict[str, Any] | None = None, **files: str) -> Path:
    """A copy of the ChatML fixture with ``config`` merged into its tokenizer_config.json and extra ``files``."""
    target = tmp_path / "tok"
    shutil.copytree(CHATML, target)
    settings = {**json.loads((CHATML / "tokenizer_config.json").read_text()), **(config or {})}
    (target / "tokenizer_config.json").write_text(json.dumps({k: v for k, v in settings.items() if v != "DROP"}))
    for name, text in files.items():
        path = target / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return target


# --------------------------------------------------------------------------------------------------
# Hand-checked values
# --------------------------------------------------------------------------------------------------
def test_embedded_smollm2_renders_and_encodes_the_known_ids() -> None:
    tokenizer = TemplateTokenizer.from_directory(smollm2_path())
    messages = [{"role": "user", "content": "Push the box."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # chat_template.jinja adds SmolLM2's default system prompt when the first message is not a system one.
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nPush the box.<|im_end|>\n<|im_start|>assistant\n"
    )
    # <|im_start|>=1, <|im_end|>=2, "\n"=198, "system"=9690, "user"=4093, "Push"=37910, " the"=260, " box"=3985,
    # "."=30; "assistant" is two tokens, "ass"=520 "istant"=9531 (the ids tests/agents/test_chat.py checks).
    ids = tokenizer.encode(text, add_special_tokens=False)
    default_system = tokenizer.encode("You are a helpful AI assistant named SmolLM, trained by Hugging Face", False)
    assert len(default_system) == 16
    user = [1, 4093, 198, 37910, 260, 3985, 30, 2, 198]
    assert ids == [1, 9690, 198, *default_system, 2, 198, *user, 1, 520, 9531, 198]
    # Split, the string "<|im_end|>" is plain text: " <"=2067, "|"=108, "im"=306, "_"=79, "end"=486, "|"=108, ">"=46.
    split = tokenizer.encode("a <|im_end|>", add_special_tokens=False, split_special_tokens=True)
    assert split == [81, 2067, 108, 306, 79, 486, 108, 46]
    assert tokenizer.encode("a <|im_end|>", add_special_tokens=False) == [81, 216, 2]  # " "=216, then the token
    assert tokenizer.decode([81, 216, 2]) == "a <|im_end|>"
    assert tokenizer.decode([81, 216, 2], skip_special_tokens=True) == "a "


def test_special_tokens_are_read_as_transformers_reads_them() -> None:
    smollm2 = TemplateTokenizer.from_directory(FIXTURES / "smollm2")  # all in tokenizer_config.json
    assert smollm2.special_tokens_map == {
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|im_end|>",
    }
    assert smollm2.all_special_ids == [1, 2, 0]  # bos, eos, unk (pad repeats eos)
    assert (smollm2.eos_token_id, smollm2.bos_token, smollm2.sep_token, smollm2.sep_token_id) == (
        2,
        "<|im_start|>",
        None,
        None,
    )
    chatml = TemplateTokenizer.from_directory(CHATML)  # the extras come from special_tokens_map.json
    assert chatml.special_tokens_map == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    assert chatml.all_special_tokens == ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<tool_call>", "</tool_call>"]
    assert chatml.all_special_ids == [2, 0, 1, 3, 4]
    assert chatml.convert_tokens_to_ids(["<tool_call>", "no-such-token"]) == [3, None]  # no unk_token: None
    assert len(chatml) == len(tokenizers_of("chatml_qwen")[0])
    with pytest.raises(AttributeError, match="no attribute 'vocab_file'"):
        chatml.vocab_file  # noqa: B018


def test_the_special_tokens_are_template_variables_and_arguments_override_them(tmp_path: Path) -> None:
    path = tokenizer_dir(tmp_path, {"chat_template": "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ x }}"})
    ours, theirs = TemplateTokenizer.from_directory(path), AutoTokenizer.from_pretrained(path)
    hello = [{"role": "user", "content": "hi"}]
    # bos_token is None in this tokenizer_config.json: the template sees it undefined (an empty string).
    assert ours.apply_chat_template(hello, tokenize=False) == "|<|im_end|>|<|endoftext|>|"
    for tokenizer in (ours, theirs):
        assert tokenizer.apply_chat_template(hello, tokenize=False, eos_token="<E>", x=1) == "|<E>|<|endoftext|>|1"
    batch = ours.apply_chat_template([hello, hello], tokenize=False)
    assert batch == ["|<|im_end|>|<|endoftext|>|"] * 2 == theirs.apply_chat_template([hello, hello], tokenize=False)


# --------------------------------------------------------------------------------------------------
# Directories that exercise the loading rules, compared with transformers
# --------------------------------------------------------------------------------------------------
def _added(content: str, special: bool, lstrip: bool = False) -> dict[str, Any]:
    return {"content": content, "lstrip": lstrip, "normalized": not special, "rstrip": False, "single_word": False}


LOADING_CASES = {
    "added tokens, a missing eos, a model-specific token": {
        "config": {
            "added_tokens_decoder": {"0": {**_added("<|endoftext|>", True), "special": True}},
            "eos_token": "<eos-not-in-tokenizer.json>",
            "image_token": "<img>",
        }
    },
    "a listed token missing from tokenizer.json": {
        "config": {"added_tokens_decoder": {"5": {**_added("<new>", False, lstrip=True), "special": False}}}
    },
    "extra tokens in the config, an AddedToken unk": {
        "config": {
            "additional_special_tokens": ["<a1>", "<|im_start|>"],
            "unk_token": {"__type": "AddedToken", **_added("<unk1>", True), "special": True},
        }
    },
    "extra tokens as a dict of names": {
        "config": {"extra_special_tokens": {"image_token": "<img>", "audio_token": "<a>"}}
    },
    "a special_tokens_map.json that overrides": {
        "files": {
            "special_tokens_map.json": json.dumps({"eos_token": _added("<|endoftext|>", True), "pad_token": "<p>"})
        }
    },
    "template files": {
        "files": {
            "chat_template.jinja": "J{{ messages[0].content }}",
            "additional_chat_templates__tool_use.jinja": "T{{ tools | tojson }}",
        }
    },
    "a list of named templates": {
        "config": {
            "chat_template": [
                {"name": "default", "template": "D{{ eos_token }}"},
                {"name": "tool_use", "template": "U"},
            ]
        }
    },
    "named templates without a default": {"config": {"chat_template": [{"name": "a", "template": "A"}]}},
    "clean-up asked of a BPE tokenizer": {"config": {"clean_up_tokenization_spaces": True}},
    "clean-up forced on a BPE tokenizer": {
        "config": {
            "clean_up_tokenization_spaces": True,
            "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True,
        }
    },
    "split special tokens by default": {"config": {"split_special_tokens": True}},
    "no tokenizer_class, no template": {"config": {"tokenizer_class": "DROP", "chat_template": "DROP"}},
}


def assert_same_as_transformers(path: Path) -> None:
    theirs, ours = AutoTokenizer.from_pretrained(path), TemplateTokenizer.from_directory(path)
    for name in ("special_tokens_map", "all_special_tokens", "all_special_ids", "chat_template", "eos_token_id"):
        assert getattr(ours, name) == getattr(theirs, name), name
    for name in ("bos_token_id", "unk_token_id", "pad_token_id", "clean_up_tokenization_spaces"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert json.loads(ours.backend_tokenizer.to_str()) == json.loads(theirs.backend_tokenizer.to_str())
    text = "x <img> y<|im_end|> <new> z , . do n't <|im_start|><a1>"
    for split in (False, True):
        for add in (False, True):
            assert ours.encode(text, add, split) == theirs.encode(
                text, add_special_tokens=add, split_special_tokens=split
            )
    ids = theirs.encode(text, add_special_tokens=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the BPE clean-up warning, from both
        for skip in (False, True):
            for clean in (None, False, True):
                assert ours.decode(ids, skip, clean) == theirs.decode(
                    ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean
                )
    hello = [{"role": "user", "content": "hi"}]
    for tools in (None, [], TOOLS):
        for template in (None, "tool_use", "{{ messages | length }}"):
            kwargs = {"tools": tools, "chat_template": template, "tokenize": False}
            assert outcome(ours.apply_chat_template, hello, **kwargs) == outcome(
                theirs.apply_chat_template, hello, **kwargs
            )


@pytest.mark.parametrize("case", list(LOADING_CASES))
def test_loading_rules_match_transformers(tmp_path: Path, case: str) -> None:
    spec = LOADING_CASES[case]
    assert_same_as_transformers(tokenizer_dir(tmp_path, spec.get("config"), **spec.get("files", {})))


def test_clean_up_of_a_wordpiece_tokenizer_matches_transformers(tmp_path: Path) -> None:
    vocab = {"[UNK]": 0, "a": 1, ",": 2, ".": 3, "n": 4, "'": 5, "t": 6, "do": 7, "?": 8}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(cleanup=False)  # the clean-up under test is the tokenizer's, not this one
    backend.save(str(tmp_path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "clean_up_tokenization_spaces": True}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    ours = TemplateTokenizer.from_directory(tmp_path)
    ids = ours.encode("a, do n't a.", add_special_tokens=False)
    # WordPiece's decoder joins the tokens with spaces: "a , do n ' t a ."; the clean-up replaces " ," by ",",
    # " ." by ".", " ' " by "'" (giving "do n't"), then " n't" by "n't".
    assert ours.decode(ids) == "a, don't a."
    assert ours.decode(ids, clean_up_tokenization_spaces=False) == "a , do n ' t a ."
    assert_same_as_transformers(tmp_path)


# --------------------------------------------------------------------------------------------------
# Random conversations and texts: identical to transformers
# --------------------------------------------------------------------------------------------------
@st.composite
def messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    roles = draw(st.lists(st.sampled_from(["system", "user", "assistant", "tool"]), min_size=1, max_size=5))
    conversation = []
    for role in roles:
        message: dict[str, Any] = {"role": role, "content": draw(texts())}
        if role == "assistant" and draw(st.booleans()):
            arguments = draw(st.dictionaries(texts(), st.one_of(texts(), st.integers(), st.none()), max_size=2))
            message["tool_calls"] = [{"type": "function", "function": {"name": "move", "arguments": arguments}}]
        if draw(st.booleans()):
            message[draw(st.sampled_from(["name", "reasoning_content", "tool_call_id"]))] = draw(st.none() | texts())
        conversation.append(message)
    return conversation


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(conversation=messages(), tools=st.sampled_from([None, [], TOOLS]), generation=st.booleans(), data=st.data())
def test_renderings_match_transformers(name: str, conversation: list, tools: Any, generation: bool, data: Any) -> None:
    theirs, ours = tokenizers_of(name)
    extra = data.draw(st.dictionaries(st.sampled_from(["date_string", "enable_thinking", "eos_token"]), texts()))
    kwargs = {"tools": tools, "tokenize": False, "add_generation_prompt": generation, **extra}
    expected = outcome(theirs.apply_chat_template, conversation, **kwargs)
    event("rendered" if isinstance(expected, str) else f"refused: {expected.__name__}")
    assert outcome(ours.apply_chat_template, conversation, **kwargs) == expected


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(text=texts(), data=st.data())
def test_encode_and_decode_match_transformers(name: str, text: str, data: Any) -> None:
    theirs, ours = tokenizers_of(name)
    for split in (False, True):
        for add in (False, True):
            assert ours.encode(text, add, split) == theirs.encode(
                text, add_special_tokens=add, split_special_tokens=split
            )
    token = st.one_of(st.integers(0, len(theirs) - 1), st.sampled_from(theirs.all_special_ids))
    ids = data.draw(st.lists(token, max_size=12))
    for skip in (False, True):
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    assert ours.decode(ids, False, False) == theirs.decode(ids, clean_up_tokenization_spaces=False)


@st.composite
def episodes(draw: st.DrawFn, renderer: ChatRenderer) -> list:
    """Turns as an engine returns them (stop token last, or cut by the limit), each followed by observations."""
    stop = renderer.stop_token_ids
    token = st.integers(0, len(renderer.tokenizer) - 1).filter(lambda i: i not in stop)
    turns = []
    for _ in range(draw(st.integers(1, 3))):
        finish_reason = draw(st.sampled_from(["stop", "length"]))
        sampled = draw(st.lists(token, min_size=1, max_size=6)) + (
            [draw(st.sampled_from(stop))] if finish_reason == "stop" else []
        )
        role = "user" if not renderer.supports_tool_messages or draw(st.booleans()) else "tool"
        observations = [{"role": role, "content": draw(texts())} for _ in range(draw(st.integers(1, 2)))]
        turns.append((sampled, finish_reason, observations))
    return turns


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(system=texts(), first=texts(), data=st.data())
def test_chat_renderer_gives_the_same_ids_over_either_tokenizer(name: str, system: str, first: str, data: Any) -> None:
    theirs, ours = renderers_of(name)
    assert ours.stop_token_ids == theirs.stop_token_ids
    assert ours.supports_tool_messages == theirs.supports_tool_messages
    conversation = [{"role": "system", "content": system}, {"role": "user", "content": first}]
    assert ours.prompt_ids(conversation) == theirs.prompt_ids(conversation)
    for sampled, finish_reason, observations in data.draw(episodes(theirs)):
        action = ours.decode_action(sampled)
        assert action == theirs.decode_action(sampled)
        assert ours.assistant_ids(action) == theirs.assistant_ids(action)
        continuation = ours.continuation_ids(conversation, observations, sampled, finish_reason)
        assert continuation == theirs.continuation_ids(conversation, observations, sampled, finish_reason)
        conversation += [{"role": "assistant", "content": action}, *observations]


# --------------------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------------------
def test_unsupported_inputs_are_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    tokenizer = TemplateTokenizer.from_directory(CHATML)
    hello = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match=r"tokenize=False .* encode\(text, add_special_tokens=False\)"):
        tokenizer.apply_chat_template(hello)  # transformers' default is tokenize=True
    for option in ("continue_final_message", "return_assistant_tokens_mask", "sanitize_control_tokens"):
        with pytest.raises(ValueError, match=f"{option}; use agents.models.load_tokenizer"):
            tokenizer.apply_chat_template(hello, tokenize=False, **{option: True})

    def move(direction: str) -> str:
        """Move.

        Args:
            direction: where.
        """
        return direction

    with pytest.raises(TypeError, match=r"'move' is a function, and only JSON schemas .*get_json_schema"):
        tokenizer.apply_chat_template(hello, tools=[move], tokenize=False)
    with pytest.raises(ValueError, match="at least one message"):
        tokenizer.apply_chat_template([], tokenize=False)
    with pytest.raises(TypeError, match="must be dicts"):
        tokenizer.apply_chat_template(["hi"], tokenize=False)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"no tokenizer\.json.*agents\.models\.load_tokenizer"):
        TemplateTokenizer.from_directory(tmp_path)
    several = TemplateTokenizer.from_directory(
        tokenizer_dir(tmp_path, {"chat_template": [{"name": "a", "template": "A"}]})
    )
    with pytest.raises(ValueError, match=r"no default: pass chat_template=<name>, one of \['a'\]"):
        several.apply_chat_template(hello, tokenize=False)
    assert several.apply_chat_template(hello, tokenize=False, chat_template="a") == "A"


def test_a_tokenizer_without_a_template_is_refused_by_the_renderer_as_before(tmp_path: Path) -> None:
    bare = TemplateTokenizer.from_directory(tokenizer_dir(tmp_path, {"chat_template": "DROP"}))
    with pytest.raises(ValueError, match="has no chat template"):
        bare.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    with pytest.raises(ChatTemplateError, match="has no chat_template"):
        ChatRenderer(bare)


# --------------------------------------------------------------------------------------------------
# Choosing the tokenizer: load_template_tokenizer and builds_like_transformers
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names load_template_tokenizer hands to load_tokenizer (which is not called for real)."""
    names: list[str] = []
    monkeypatch.setattr(agent_models, "load_tokenizer", lambda name: names.append(name) or "transformers tokenizer")
    return names


def test_local_tokenizer_json_directories_get_the_light_tokenizer(fallbacks: list[str]) -> None:
    assert isinstance(load_template_tokenizer("smollm2"), TemplateTokenizer)
    assert isinstance(load_template_tokenizer(str(CHATML)), TemplateTokenizer)
    assert fallbacks == []


@pytest.mark.parametrize(
    "case", ["hub id", "gguf file", "no tokenizer.json", "Qwen2Tokenizer", "qwen2 model type", "custom code"]
)
def test_everything_else_falls_back_to_transformers(tmp_path: Path, fallbacks: list[str], case: str) -> None:
    if case == "hub id":
        name = "HuggingFaceTB/SmolLM2-135M-Instruct"
    elif case == "gguf file":
        name = str(tmp_path / "model.gguf")
        Path(name).write_bytes(b"GGUF")
    else:
        config = {"Qwen2Tokenizer": {"tokenizer_class": "Qwen2Tokenizer"}, "custom code": {"auto_map": {}}}
        name = str(tokenizer_dir(tmp_path, config.get(case)))
        if case == "no tokenizer.json":
            (Path(name) / "tokenizer.json").unlink()
        if case == "qwen2 model type":
            (Path(name) / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert load_template_tokenizer(name) == "transformers tokenizer"
    assert fallbacks == [name]


@pytest.mark.parametrize("config", [{"tokenizer_class": "Qwen2Tokenizer"}, {"model_type": "qwen2"}])
def test_model_specific_tokenizer_classes_rebuild_the_backend_so_they_are_left_to_transformers(
    tmp_path: Path, config: dict[str, str]
) -> None:
    path = tokenizer_dir(tmp_path, {"tokenizer_class": config.get("tokenizer_class", "PreTrainedTokenizerFast")})
    if "model_type" in config:
        (path / "config.json").write_text(json.dumps(config))
    theirs = AutoTokenizer.from_pretrained(path)
    assert type(theirs).__name__ == "Qwen2Tokenizer"
    # Its own normalizer (NFC) and pre-tokenizer, and a default unk_token the template would see.
    assert json.loads(theirs.backend_tokenizer.to_str())["normalizer"] == {"type": "NFC"}
    assert theirs.special_tokens_map != TemplateTokenizer.from_directory(path).special_tokens_map
    assert not builds_like_transformers(path)
    assert builds_like_transformers(CHATML) and builds_like_transformers(smollm2_path())


def test_the_model_types_with_their_own_tokenizer_are_transformers_current_list() -> None:
    from transformers.models.auto import tokenization_auto

    from agents import template_tokenizer

    generic = (None, *template_tokenizer._GENERIC_CLASSES)
    swapped = {
        model_type
        for model_type in tokenization_auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
        if tokenization_auto.TOKENIZER_MAPPING_NAMES.get(model_type) not in generic
    }
    assert swapped == template_tokenizer._MODEL_TYPES_WITH_OWN_TOKENIZER, "update _MODEL_TYPES_WITH_OWN_TOKENIZER"
    assert all(
        tokenization_auto.tokenizer_class_from_name(name).__name__ == "TokenizersBackend" for name in generic[1:]
    )


# --------------------------------------------------------------------------------------------------
# An environment actor's process
# --------------------------------------------------------------------------------------------------
ACTOR_RENDERING = """
import json, sys
import envs
from trainer.rollout_worker import ChatRendererFactory

renderer = ChatRendererFactory("smollm2")()
env = envs.make("sokoban")
env.reset(seed=0)
ids = renderer.prompt_ids(env.messages())
print(json.dumps([type(renderer.tokenizer).__name__, "torch" in sys.modules, "transformers" in sys.modules, ids]))
"""


def test_an_environment_actors_renderer_imports_neither_torch_nor_transformers() -> None:
    import envs

    smollm2_path()  # converted here if it is not cached yet (the conversion needs transformers), not in the child
    result = subprocess.run(
        [sys.executable, "-c", ACTOR_RENDERING],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    kind, imported_torch, imported_transformers, ids = json.loads(result.stdout.splitlines()[-1])
    assert (kind, imported_torch, imported_transformers) == ("TemplateTokenizer", False, False)
    env = envs.make("sokoban")
    env.reset(seed=0)
    assert ids == ChatRenderer(tokenizers_of("smollm2")[0]).prompt_ids(env.messages())  # transformers' ids
