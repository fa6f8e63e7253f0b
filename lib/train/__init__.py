"""Training, data and decoding: the schedule and loss, the training loop, the
date task, greedy and beam decoding (chapter 8 on)."""

from lib.train.data import BOS, EOS, PAD, Batch, CharVocab, make_batch
from lib.train.dates import (
    DATE_VOCAB,
    MONTHS,
    DateSplit,
    format_source,
    format_target,
    make_date_split,
    read_target,
    sample_pairs,
)
from lib.train.decoding import (
    BeamSearchResult,
    beam_search,
    exact_match,
    gnmt_length_penalty,
    greedy_decode,
    sequence_log_prob,
    translate,
)
from lib.train.generate import (
    context_length,
    continuation_log_prob,
    generate,
    lm_beam_search,
    sample_next,
)
from lib.train.gguf_tokenizer import GGUFTokenizer
from lib.train.sampling import chi_square_test, generate_sampled, sample, sampler_probs
from lib.train.speculative import (
    SpeculativeResult,
    early_exit_draft,
    speculative_accept,
    speculative_generate,
    truncate_cache,
)
from lib.train.ngram import ngram_nats, ngram_token_nats
from lib.train.training import (
    FitResult,
    LMBatch,
    MaskedLMBatch,
    causal_lm_loss,
    evaluation_windows,
    fit,
    lm_loss,
    random_windows,
    label_smoothed_nll,
    noam_lambda,
    noam_lr,
    noam_optimizer,
    train_step,
)


__all__ = [
    "GGUFTokenizer",
    "sampler_probs",
    "sample",
    "generate_sampled",
    "chi_square_test",
    "SpeculativeResult",
    "early_exit_draft",
    "speculative_accept",
    "speculative_generate",
    "truncate_cache",
    "BOS",
    "EOS",
    "PAD",
    "Batch",
    "CharVocab",
    "make_batch",
    "DATE_VOCAB",
    "MONTHS",
    "DateSplit",
    "format_source",
    "format_target",
    "read_target",
    "make_date_split",
    "sample_pairs",
    "beam_search",
    "BeamSearchResult",
    "gnmt_length_penalty",
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
    "LMBatch",
    "MaskedLMBatch",
    "causal_lm_loss",
    "evaluation_windows",
    "lm_loss",
    "random_windows",
    "context_length",
    "generate",
    "sample_next",
    "continuation_log_prob",
    "lm_beam_search",
    "ngram_nats",
    "ngram_token_nats",
]

# Beyond the paper: tokenization, the corpus, data parallelism, mixed precision.
from lib.train.bpe import (  # noqa: E402
    BPETokenizer,
    count_pairs,
    merge_pair,
    pretokenize,
    train_naive,
    train_tokenizers_reference,
)
from lib.train.corpus import (  # noqa: E402
    VALIDATION_PLAYS,
    CorpusSplit,
    load_corpus,
    load_works,
    split_by_play,
)
from lib.train.parallel import ParallelRun, train_data_parallel, train_single_process  # noqa: E402
from lib.train.precision import PrecisionRun, train_dates_mixed_precision  # noqa: E402

__all__ += [
    "BPETokenizer",
    "count_pairs",
    "merge_pair",
    "pretokenize",
    "train_naive",
    "train_tokenizers_reference",
    "VALIDATION_PLAYS",
    "CorpusSplit",
    "load_corpus",
    "load_works",
    "split_by_play",
    "ParallelRun",
    "train_data_parallel",
    "train_single_process",
    "PrecisionRun",
    "train_dates_mixed_precision",
]

# Beyond the paper: translation of a real parallel corpus.
from lib.train.aligned_corpus import (  # noqa: E402
    ALIGNMENT_WHEEL,
    NT_BOOKS,
    TEST_BOOKS,
    VersePair,
    VerseSplit,
    alignment_wheel_path,
    load_verse_pairs,
    split_by_book,
)
from lib.train.translation import (  # noqa: E402
    EncodedPair,
    PairedDifference,
    SubwordVocab,
    encode_pairs,
    length_batches,
    make_translation_batch,
    paired_bootstrap,
    train_subword_vocab,
    translate_ids,
    translation_loss,
    load_translation_checkpoint,
    save_translation_checkpoint,
    vocab_fingerprint,
    TRANSLATION_CHECKPOINT,
    TRANSLATION_CHECKPOINT_SHA256,
)

__all__ += ["PairedDifference", "paired_bootstrap"]
__all__ += ["load_translation_checkpoint", "save_translation_checkpoint", "vocab_fingerprint"]
__all__ += ["TRANSLATION_CHECKPOINT", "TRANSLATION_CHECKPOINT_SHA256"]
__all__ += [
    "ALIGNMENT_WHEEL",
    "NT_BOOKS",
    "TEST_BOOKS",
    "VersePair",
    "VerseSplit",
    "alignment_wheel_path",
    "load_verse_pairs",
    "split_by_book",
    "EncodedPair",
    "SubwordVocab",
    "encode_pairs",
    "length_batches",
    "make_translation_batch",
    "train_subword_vocab",
    "translate_ids",
    "translation_loss",
]

# The first page's live model: chapter 8's date model, shipped trained (issue 35).
from lib.train.date_checkpoint import (  # noqa: E402
    DATE_CHECKPOINT,
    DATE_CHECKPOINT_SHA256,
    load_date_checkpoint,
    save_date_checkpoint,
)

__all__ += ["DATE_CHECKPOINT", "DATE_CHECKPOINT_SHA256", "load_date_checkpoint",
            "save_date_checkpoint"]
