"""Training, data and decoding: the schedule and loss, the training loop, the
date task, greedy and beam decoding (chapter 8 on)."""

from lib.train.data import (
    BOS,
    DATE_VOCAB,
    EOS,
    MONTHS,
    PAD,
    Batch,
    CharVocab,
    DateSplit,
    format_source,
    format_target,
    make_batch,
    make_date_split,
    sample_pairs,
)
from lib.train.decoding import beam_search, exact_match, greedy_decode, sequence_log_prob, translate
from lib.train.training import (
    FitResult,
    fit,
    label_smoothed_nll,
    noam_lambda,
    noam_lr,
    noam_optimizer,
    train_step,
)

__all__ = [
    "BOS",
    "DATE_VOCAB",
    "EOS",
    "MONTHS",
    "PAD",
    "Batch",
    "CharVocab",
    "DateSplit",
    "format_source",
    "format_target",
    "make_batch",
    "make_date_split",
    "sample_pairs",
    "beam_search",
    "exact_match",
    "greedy_decode",
    "sequence_log_prob",
    "translate",
    "FitResult",
    "fit",
    "label_smoothed_nll",
    "noam_lambda",
    "noam_lr",
    "noam_optimizer",
    "train_step",
]
