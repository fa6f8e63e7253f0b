"""Teaching aids: exercise checkers, worked-example tables, complexity
measurements, the architecture diagram and shared plots."""

from lib.teach import checkers as _checkers
from lib.teach.checkers import *  # noqa: F403
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.complexity import conv_stack, depends_on, graph_depth, layer_macs
from lib.teach.diagram import draw_architecture, module_call_order, record_forward
from lib.teach.exercises import (
    AttentionSteps,
    CheckResult,
    attention_steps,
    check_answer,
    check_attention,
    check_attention_weights,
    compare_table,
    text_table,
)
from lib.teach.figures import describe_figure, figure_alt
from lib.teach.next_tokens import next_tokens, next_tokens_table, plot_next_tokens
from lib.teach.plots import plot_heatmap
from lib.teach.scaling import retrieval_run, score_gradients

__all__ = [
    *_checkers.__all__,
    "Case",
    "Mistake",
    "Verdict",
    "check_function",
    "next_tokens",
    "next_tokens_table",
    "plot_next_tokens",
    "conv_stack",
    "depends_on",
    "graph_depth",
    "layer_macs",
    "draw_architecture",
    "module_call_order",
    "record_forward",
    "AttentionSteps",
    "CheckResult",
    "attention_steps",
    "check_answer",
    "check_attention",
    "check_attention_weights",
    "compare_table",
    "text_table",
    "plot_heatmap",
    "retrieval_run",
    "score_gradients",
    "describe_figure",
    "figure_alt",
]
from lib.teach.probes import (  # noqa: E402  (chapter 8's experiments)
    BeamStep,
    ScriptedModel,
    background_workers,
    beam_trace,
    cross_attention_ablation,
    cross_attention_maps,
    date_fields,
    date_model_config,
    date_model_run,
    PendingModel,
    PendingRuns,
    row_probe,
    start_date_model_run,
    start_warmup_runs,
    warmup_run,
    warmup_runs,
)

__all__ += [
    "BeamStep",
    "ScriptedModel",
    "beam_trace",
    "cross_attention_ablation",
    "cross_attention_maps",
    "date_fields",
    "row_probe",
    "warmup_run",
    "warmup_runs",
    "start_warmup_runs",
    "PendingRuns",
    "date_model_config",
    "date_model_run",
    "start_date_model_run",
    "PendingModel",
    "background_workers",
]

from lib.teach.measure import ATTENTION_PATHS, LargestTensor, measure_attention  # noqa: E402

__all__ += [
    "ATTENTION_PATHS",
    "LargestTensor",
    "measure_attention",
]

from lib.teach.alignment import (  # noqa: E402  (the translation chapter)
    AlignmentCounts,
    AttentionAlignment,
    aer_difference,
    alignment_error_rate,
    argmax_links,
    cross_attention_by_layer,
    diagonal_links,
    score_attention_alignments,
    word_attention,
)

__all__ += [
    "AlignmentCounts",
    "AttentionAlignment",
    "aer_difference",
    "alignment_error_rate",
    "argmax_links",
    "cross_attention_by_layer",
    "diagonal_links",
    "score_attention_alignments",
    "word_attention",
]

from lib.teach.results import RESULT_MIME, check_band, glue  # noqa: E402  (run values, bands)

__all__ += ["RESULT_MIME", "check_band", "glue"]

from lib.teach.extrapolation import (  # noqa: E402  (chapter 6)
    PatternRun, dominant_period, repeating, train_pattern_model,
)

__all__ += ["PatternRun", "dominant_period", "repeating", "train_pattern_model"]

from lib.teach.induction import (  # noqa: E402  (chapter 16)
    AttentionOnlyModel,
    InductionRun,
    ablation_losses,
    early_late_losses,
    induction_ablation,
    half_losses,
    induction_scores,
    previous_token_scores,
    repeat_probe,
    repeated_tokens,
    train_attention_only,
)

__all__ += [
    "AttentionOnlyModel",
    "InductionRun",
    "ablation_losses",
    "early_late_losses",
    "induction_ablation",
    "half_losses",
    "induction_scores",
    "previous_token_scores",
    "repeat_probe",
    "repeated_tokens",
    "train_attention_only",
]
