"""The SGLang JSON, the weight-update bodies and the sticky router, without any server."""

from __future__ import annotations

import base64
import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from sglang_compat_server import _load_named_tensors

from agents.engines.base import SamplingParams
from agents.engines.sglang_protocol import SGLangProtocolError, build_generate_request, parse_generate_response
from agents.engines.sglang_router import StickyRouter
from agents.engines.sglang_weights import (
    disk_update_request,
    distributed_update_request,
    init_group_request,
    tensor_update_request,
)


def test_generate_request_maps_sampling_to_sglang_names():
    sampling = SamplingParams(max_new_tokens=7, temperature=0.5, top_p=0.9, top_k=0, stop_token_ids=(2, 9), seed=11)
    assert build_generate_request([5, 6], sampling) == {
        "input_ids": [5, 6],
        "sampling_params": {
            "max_new_tokens": 7,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": -1,  # SGLang's "off"; it rejects 0
            "stop_token_ids": [2, 9],
            "sampling_seed": 11,
        },
        "return_logprob": True,
        "logprob_start_len": -1,  # output logprobs only: prompt logprobs would bypass the radix cache
    }


def test_generate_request_leaves_out_unset_optional_fields():
    params = build_generate_request([1], SamplingParams(top_k=5))["sampling_params"]
    assert params == {"max_new_tokens": 256, "temperature": 1.0, "top_p": 1.0, "top_k": 5}
    with pytest.raises(ValueError, match="empty"):
        build_generate_request([], SamplingParams())


def _response(output_ids, entries, finish_reason, cached=3):
    meta = {"finish_reason": finish_reason, "prompt_tokens": 10, "cached_tokens": cached}
    return {"text": "x", "output_ids": output_ids, "meta_info": meta | {"output_token_logprobs": entries}}


def test_parse_response_keeps_ids_logprobs_and_counts():
    body = _response([4, 2], [[-0.25, 4, "a"], [-1.5, 2, None]], {"type": "stop", "matched": 2})
    generation = parse_generate_response(body)
    assert generation.output_ids == (4, 2)  # the matched stop token stays last
    assert generation.logprobs == (-0.25, -1.5)
    assert (generation.finish_reason, generation.prompt_tokens, generation.cached_tokens) == ("stop", 10, 3)
    length = parse_generate_response(_response([7], [[-2.0, 7, None]], {"type": "length", "length": 1}))
    assert length.finish_reason == "length"


def test_parse_response_abort_and_rejection():
    aborted = parse_generate_response(_response([], [], {"type": "abort", "message": "shutdown"}))
    assert aborted.finish_reason == "abort" and aborted.output_ids == ()
    too_long = {"type": "abort", "message": "The input (9000 tokens) is longer than", "status_code": 400}
    with pytest.raises(ValueError, match="9000 tokens"):
        parse_generate_response(_response([], [], too_long))


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"output_ids": [1]}, "no meta_info"),
        ({"meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": []}}, "no output_ids"),
        (_response([1], [[-1.0, 1, None]], None), "finish_reason"),
        (_response([1], None, {"type": "length"}), "return_logprob"),
        (_response([1, 2], [[-1.0, 1, None]], {"type": "length"}), "2 output ids but 1"),
        (_response([1], [[-1.0, 5, None]], {"type": "length"}), "for token 5"),
        (_response([1], [[None, 1, None]], {"type": "length"}), r"\[logprob, id, text\]"),
    ],
)
def test_parse_response_rejects_malformed_bodies(body, match):
    with pytest.raises(SGLangProtocolError, match=match):
        parse_generate_response(body)


def test_weight_update_bodies():
    assert disk_update_request("/ckpt/step-3", policy_version=3) == {
        "model_path": "/ckpt/step-3",
        "load_format": None,
        "weight_version": "3",
    }
    # two servers of tp 2 behind one trainer rank: world 1 + 2*2 = 5, server 1 starts at rank 1 + 1*2 = 3
    assert init_group_request("10.0.0.1", 29500, 3, 5)["rank_offset"] == 3
    with pytest.raises(ValueError, match="rank 0 is the trainer"):
        init_group_request("10.0.0.1", 29500, 0, 5)
    body = distributed_update_request(["a", "b"], [torch.bfloat16, "float32"], [(2, 3), [4]], policy_version=1)
    assert body == {
        "names": ["a", "b"],
        "dtypes": ["bfloat16", "float32"],
        "shapes": [[2, 3], [4]],
        "group_name": "weight_update_group",
        "weight_version": "1",
    }
    with pytest.raises(ValueError, match="must match"):
        distributed_update_request(["a"], [], [[1]])


def test_tensor_update_body_round_trips_through_shared_memory():
    weights = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor([1.5, -2.0])}
    body = tensor_update_request(weights.items(), tp_size=2, policy_version=4)
    assert len(body["serialized_named_tensors"]) == 2  # one payload per tensor-parallel rank
    assert body["weight_version"] == "4"
    loaded = _load_named_tensors(body["serialized_named_tensors"][0])
    assert set(loaded) == {"w", "b"}
    assert torch.equal(loaded["w"], weights["w"]) and torch.equal(loaded["b"], weights["b"])


def test_tensor_unpickler_refuses_arbitrary_globals():
    import pickle

    payload = base64.b64encode(pickle.dumps([("x", math.sqrt)])).decode()
    with pytest.raises(pickle.UnpicklingError, match=r"math\.sqrt"):
        _load_named_tensors(payload)


def test_router_spreads_new_keys_and_keeps_old_ones():
    router = StickyRouter(num_servers=2)
    assert [router.route(f"k{i}") for i in range(4)] == [0, 1, 0, 1]  # ties: fewest keys, then lowest index
    assert router.route("k1") == 1
    router.in_flight[0] = 5  # busy server 0: the next new key goes to 1 although it holds as many keys
    assert router.route("k4") == 1
    router.mark_unhealthy(1)
    assert router.route("k1") == 0  # moved off the unhealthy server
    router.mark_unhealthy(0)
    with pytest.raises(RuntimeError, match="no healthy SGLang server"):
        router.route("k9")


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 15), min_size=1, max_size=80),
    num_servers=st.integers(1, 4),
    max_keys=st.integers(1, 8),
)
def test_router_is_sticky_within_the_lru_bound(keys, num_servers, max_keys):
    router = StickyRouter(num_servers, max_keys)
    seen: dict[int, int] = {}
    recent: list[int] = []
    for key in keys:
        server = router.route(str(key))
        if key in recent[-max_keys:] and key in seen:
            # still remembered: it must go where it went before
            assert server == seen[key]
        seen[key] = server
        recent = [k for k in recent if k != key] + [key]
        assert len(router) <= max_keys
        assert sum(router.keys_assigned) == len(router)
