"""The model: attention, the layers, the Transformer and its encoder-only and
decoder-only relatives, and the RNN attention of chapter 1."""

from lib.model.attention import (
    MultiHeadAttention,
    causal_mask,
    check_qkv,
    padding_mask,
    scaled_dot_product_attention,
)
from lib.model.families import DecoderOnlyModel, EncoderOnlyModel
from lib.model.kv_cache import AttentionCache, KVCache
from lib.model.layers import (
    LearnedPositionalEmbedding,
    PositionwiseFeedForward,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_positional_encoding,
)
from lib.model.rnn_attention import (
    additive_score,
    attend,
    bahdanau_step,
    linear_readout_r2,
    luong_step,
    multiplicative_score,
    run_encoder,
)
from lib.model.transformer import DecoderLayer, EncoderLayer, Transformer, TransformerConfig

__all__ = [
    "MultiHeadAttention",
    "causal_mask",
    "check_qkv",
    "padding_mask",
    "scaled_dot_product_attention",
    "DecoderOnlyModel",
    "EncoderOnlyModel",
    "AttentionCache",
    "KVCache",
    "LearnedPositionalEmbedding",
    "PositionwiseFeedForward",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "sinusoidal_positional_encoding",
    "additive_score",
    "attend",
    "bahdanau_step",
    "linear_readout_r2",
    "luong_step",
    "multiplicative_score",
    "run_encoder",
    "DecoderLayer",
    "EncoderLayer",
    "Transformer",
    "TransformerConfig",
]

# Beyond the paper: attention that never stores the (m x n) weights.
from lib.model.tiled import tiled_attention  # noqa: E402

__all__ += [
    "tiled_attention",
]

# Today's decoder (chapter 14): RMSNorm, rotary, SwiGLU, grouped-query attention.
from lib.model.modern import (  # noqa: E402
    GroupedQueryAttention,
    ModernBlock,
    ModernConfig,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    apply_rotary,
    kv_cache_bytes,
    rotary_tables,
)

__all__ += [
    "GroupedQueryAttention",
    "ModernBlock",
    "ModernConfig",
    "ModernDecoder",
    "RMSNorm",
    "SwiGLU",
    "apply_rotary",
    "kv_cache_bytes",
    "rotary_tables",
]

# The Llama architecture (chapter 15); reading a GGUF file into it is lib.interop.llama_gguf.
from lib.model.llama import (  # noqa: E402
    half_to_interleaved,
    interleaved_to_half,
)

__all__ += [
    "half_to_interleaved",
    "interleaved_to_half",
]


def __getattr__(name: str):  # lib.model.load_smollm2 etc., moved to lib.interop.llama_gguf
    from lib.model import llama

    if name in llama.MOVED_TO_INTEROP:
        return getattr(llama, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Looking inside a model (chapter 16): hook points' tensors, where two models differ.
from lib.model.inspect import (  # noqa: E402
    LayerDifference,
    ablate_heads,
    attention_hook,
    compare_layers,
    hook_names,
    run_with_cache,
)

__all__ += [
    "LayerDifference",
    "ablate_heads",
    "attention_hook",
    "compare_layers",
    "hook_names",
    "run_with_cache",
]

# Generating text (chapter 17): the offset causal mask, chunked prefill, int8/bf16 weights.
from lib.model.chunked import chunked_logits, offset_causal_mask, top_left_mask  # noqa: E402

__all__ += ["chunked_logits", "offset_causal_mask", "top_left_mask"]
from lib.model.quantized import (  # noqa: E402
    Int8Embedding,
    Int8Linear,
    int8_blocks,
    quantize_int8,
    weight_bytes,
)

__all__ += ["Int8Embedding", "Int8Linear", "int8_blocks", "quantize_int8", "weight_bytes"]

# An optional compiled batch-1 decoding step (chapter 17; needs a C++ compiler).
from lib.model.native import native_available, native_decoding  # noqa: E402

__all__ += ["native_available", "native_decoding"]
