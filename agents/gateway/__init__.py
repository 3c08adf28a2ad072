"""An OpenAI-compatible gateway that records the exact tokens an agent's requests sampled.

Any agent program that talks to an OpenAI-compatible endpoint can be evaluated and trained unchanged:
point its client at ``<gateway>/sessions/<session id>/v1``. Behind that endpoint the gateway renders
the messages with :class:`~agents.chat.ChatRenderer`, samples through a token-level engine, and
records per session the prompt ids, the sampled ids and their logprobs, the masks, the messages and
each turn's provenance (request, policy version). Histories that are not append-only become several
exact segments instead of re-encoded text. Finishing a session with a reward turns it into
:class:`~agents.trajectory.Trajectory` records for the learner.

* :mod:`agents.gateway.service`: the core (:class:`Gateway`), without HTTP;
* :mod:`agents.gateway.sessions`: the records and the reward rule;
* :mod:`agents.gateway.messages`: what a request may contain;
* :mod:`agents.gateway.server`: the HTTP routes (:class:`GatewayServer`);
* :mod:`agents.gateway.agent`: running an agent function against a gateway (training and evaluation).
"""

from agents.gateway.messages import ChatRequest, GatewayError, parse_request
from agents.gateway.service import Completion, Gateway, GatewayLimits, GatewayStats
from agents.gateway.sessions import Segment, Session, TurnRecord

__all__ = [
    "ChatRequest",
    "Completion",
    "Gateway",
    "GatewayError",
    "GatewayLimits",
    "GatewayStats",
    "Segment",
    "Session",
    "TurnRecord",
    "parse_request",
]
