"""One module of exercise checkers per chapter, each built on `lib.teach.checking`."""

from lib.teach.checkers import (
    attention,
    complexity,
    efficient,
    feed_forward,
    generating,
    heads,
    induction,
    language_model,
    layers,
    modern,
    positions,
    pretrained,
    rnn_attention,
    tokenization,
    training,
    translation,
    worked_examples,
)
from lib.teach.checkers.attention import *  # noqa: F403
from lib.teach.checkers.complexity import *  # noqa: F403
from lib.teach.checkers.efficient import *  # noqa: F403
from lib.teach.checkers.feed_forward import *  # noqa: F403
from lib.teach.checkers.generating import *  # noqa: F403
from lib.teach.checkers.heads import *  # noqa: F403
from lib.teach.checkers.induction import *  # noqa: F403
from lib.teach.checkers.language_model import *  # noqa: F403
from lib.teach.checkers.layers import *  # noqa: F403
from lib.teach.checkers.modern import *  # noqa: F403
from lib.teach.checkers.positions import *  # noqa: F403
from lib.teach.checkers.pretrained import *  # noqa: F403
from lib.teach.checkers.rnn_attention import *  # noqa: F403
from lib.teach.checkers.tokenization import *  # noqa: F403
from lib.teach.checkers.training import *  # noqa: F403
from lib.teach.checkers.translation import *  # noqa: F403
from lib.teach.checkers.worked_examples import *  # noqa: F403

__all__ = [
    name
    for module in (
        rnn_attention, attention, worked_examples, heads, feed_forward,
        positions, layers, training, complexity, efficient, tokenization,
        language_model, translation, pretrained, modern, induction, generating,
    )
    for name in module.__all__
]
