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

# A pretrained Llama-architecture model read from a GGUF file (chapter 15).
from lib.model.llama import (  # noqa: E402
    half_to_interleaved,
    interleaved_to_half,
    llama_config,
    load_llama_gguf,
    load_smollm2,
)

__all__ += [
    "half_to_interleaved",
    "interleaved_to_half",
    "llama_config",
    "load_llama_gguf",
    "load_smollm2",
]

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
