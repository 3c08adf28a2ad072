"""Inference engines behind one async protocol (:mod:`agents.engines.base`): ``hf``, ``sglang``, ``openai``."""

from agents.engines.base import Engine, EngineStats, FinishReason, Generation, SamplingParams

__all__ = ["Engine", "EngineStats", "FinishReason", "Generation", "SamplingParams"]
