"""Deterministic, realistic-looking conversation text for the search benchmark and tests.

Messages alternate user questions and longer assistant answers over a dozen technical
topics, with a Zipf-like word distribution, stop words, code-ish tokens and numbers, so
the tsvector statistics (document lengths, document frequencies) look like real chat.
"""

from __future__ import annotations

import random

TOPICS: dict[str, list[str]] = {
    "databases": "database index query planner postgres vacuum table column join btree gin "
    "transaction isolation deadlock replica replication partition schema migration "
    "optimization latency throughput connection pool".split(),
    "python": "python function class decorator generator asyncio coroutine typing module "
    "package import exception traceback virtualenv pip pytest fixture dataclass".split(),
    "deployment": "deploy kubernetes container docker image registry helm chart rollout "
    "canary rollback pod node cluster ingress service secret configmap".split(),
    "frontend": "react component state hook render props browser css layout flexbox "
    "typescript bundle webpack vite accessibility animation".split(),
    "security": "token authentication authorization oauth password hash salt encryption "
    "certificate tls vulnerability injection sanitize audit permission role".split(),
    "ml": "model training dataset embedding gradient loss epoch batch inference tokenizer "
    "transformer attention finetune evaluation benchmark prompt".split(),
    "billing": "invoice payment subscription refund customer plan upgrade discount tax "
    "receipt charge stripe currency checkout".split(),
    "travel": "flight hotel booking itinerary airport luggage passport visa train ticket "
    "reservation destination schedule delay".split(),
    "cooking": "recipe oven flour sugar butter onion garlic simmer bake roast spice salt "
    "pepper sauce dough knead".split(),
    "networking": "packet router firewall dns latency bandwidth socket tcp udp proxy "
    "loadbalancer timeout retry handshake".split(),
    "observability": "metrics logging tracing dashboard alert prometheus grafana span "
    "histogram percentile incident oncall".split(),
    "testing": "unit integration regression coverage mock fixture assertion flaky ci "
    "pipeline snapshot property hypothesis".split(),
}
COMMON = (
    "need help please think problem issue work working works make sure know want try "
    "tried thanks question answer example case change changed look looks good better "
    "best way step first next last time slow fast new old small large error fix fixed "
    "update check run running result results value values setting settings use using "
    "data file files system user users request response call calls".split()
)
# A long tail of rarer words (names, identifiers, jargon) so document frequencies spread
# out the way they do in real chat instead of a few words being in every message.
_SYL = "ka lo mi ra ten vo zu pe shi an dor bel cri fan gus hol jin mar nev ost".split()
TAIL = [a + b + c for a in _SYL for b in _SYL for c in ("", "n", "ta", "ric")]
STOP = "the a an and or of to in on for with is are was be it this that we you i can".split()
USER_OPENERS = [
    "How do I",
    "Why does",
    "Can you explain",
    "What is the best way to",
    "I am seeing",
    "Is it possible to",
    "Could you check",
    "Help me with",
]


_WEIGHTS: dict[int, list[float]] = {}


def _zipf_pick(rng: random.Random, words: list[str]) -> str:
    # Rank r is chosen with weight 1/r: a few words dominate, as in real text.
    weights = _WEIGHTS.get(len(words))
    if weights is None:
        weights = _WEIGHTS[len(words)] = [1.0 / (r + 1) for r in range(len(words))]
    return rng.choices(words, weights=weights, k=1)[0]


def _sentence(rng: random.Random, topic: list[str], n_words: int) -> str:
    words = []
    for _ in range(n_words):
        roll = rng.random()
        if roll < 0.35:
            words.append(rng.choice(STOP))
        elif roll < 0.65:
            words.append(_zipf_pick(rng, topic))
        elif roll < 0.77:
            words.append(rng.choice(COMMON))
        elif roll < 0.95:
            words.append(rng.choice(TAIL))
        else:
            words.append(
                rng.choice(
                    [
                        f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}",
                        str(rng.randint(1, 5000)),
                        f"err_{rng.randint(100, 999)}",
                        f"{_zipf_pick(rng, topic)}_{_zipf_pick(rng, COMMON)}()",
                    ]
                )
            )
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", "?", "!"])


def message_text(rng: random.Random, role: str) -> str:
    """One message body; users write 1-2 short sentences, assistants 2-8 longer ones."""
    topic = TOPICS[rng.choice(list(TOPICS))]
    if role == "user":
        lead = rng.choice(USER_OPENERS)
        return (
            lead
            + " "
            + " ".join(_sentence(rng, topic, rng.randint(5, 18)) for _ in range(rng.randint(1, 2)))
        )
    return " ".join(_sentence(rng, topic, rng.randint(8, 30)) for _ in range(rng.randint(2, 8)))


def conversation(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """n (role, text) pairs alternating user/assistant."""
    rng = random.Random(seed)
    return [
        (role, message_text(rng, role))
        for role in ("user" if i % 2 == 0 else "assistant" for i in range(n))
    ]


def queries(n: int, seed: int = 11) -> list[str]:
    """n search queries of 1-4 topic/common words, some phrased as questions."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        topic = TOPICS[rng.choice(list(TOPICS))]
        words = [_zipf_pick(rng, topic) for _ in range(rng.randint(1, 3))]
        roll = rng.random()
        if roll < 0.2:
            words.append(rng.choice(COMMON))
        elif roll < 0.5:
            words.append(rng.choice(TAIL))
        q = " ".join(words)
        out.append(f"what did we say about {q}?" if rng.random() < 0.3 else q)
    return out
