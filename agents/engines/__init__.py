"""Inference engines behind one async protocol (:mod:`agents.engines.base`); the table of them is
:mod:`agents.engines.registry` (``hf``, ``sglang``, ``openai``)."""

from agents.engines.base import (
    WEIGHT_SYNCS,
    DiskWeights,
    Engine,
    EngineStats,
    FinishReason,
    Generation,
    SamplingParams,
    WeightSync,
)

__all__ = [
    "WEIGHT_SYNCS",
    "DiskWeights",
    "Engine",
    "EngineStats",
    "FinishReason",
    "Generation",
    "SamplingParams",
    "WeightSync",
]
