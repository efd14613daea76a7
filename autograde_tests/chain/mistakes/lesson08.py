"""Lesson 8, The Transformer assembled and trained: planted mistakes and the test cells that must catch them.

add_and_norm calls the learner's layer_norm, and encoder_layer calls the learner's add_and_norm,
so a bug in layer_norm also costs Exercises 2 and 3, and a bug in add_and_norm also costs
Exercise 3: those cascades are declared here, and they are what a learner would see. The decoder
layer (PyTorch, F.layer_norm) and greedy decoding (the library's trained model) stand alone.
"""

from . import mistake

NORM_CHAIN = {"test_layer_norm", "test_add_and_norm", "test_encoder_layer"}
RESIDUAL_CHAIN = {"test_add_and_norm", "test_encoder_layer"}

MISTAKES = [
    mistake("lesson08", "unbiased-variance", "layer_norm",
            "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)", "var = x.var(axis=-1, ddof=1, keepdims=True)",
            NORM_CHAIN, "the sample variance (divided by d - 1): nn.LayerNorm divides by d"),
    mistake("lesson08", "no-eps", "layer_norm",
            "np.sqrt(var + eps)", "np.sqrt(var)",
            NORM_CHAIN, "without eps a row of equal features gives 0 / 0 = NaN, and every other row is slightly off"),
    mistake("lesson08", "norm-over-tokens", "layer_norm",
            "mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
            "mean = x.mean(axis=-2, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-2, keepdims=True)",
            NORM_CHAIN, "statistics over the tokens (a batch-norm-like axis) instead of each token's features"),
    mistake("lesson08", "pre-norm", "add_and_norm",
            'return layer_norm(x + sublayer(x), norm["gamma"], norm["beta"])',
            'return x + sublayer(layer_norm(x, norm["gamma"], norm["beta"]))',
            RESIDUAL_CHAIN, "x + Sublayer(LayerNorm(x)), the later pre-norm variant, not the paper's post-norm"),
    mistake("lesson08", "residual-forgotten", "add_and_norm",
            'return layer_norm(x + sublayer(x), norm["gamma"], norm["beta"])',
            'return layer_norm(sublayer(x), norm["gamma"], norm["beta"])',
            RESIDUAL_CHAIN, "LayerNorm(Sublayer(x)): no residual connection"),
    mistake("lesson08", "ffn-reads-layer-input", "encoder_layer",
            "return add_and_norm(h, lambda t:", "return add_and_norm(x, lambda t:",
            {"test_encoder_layer"}, "the second sub-layer applied to the layer's input, not to the attention's output"),
    mistake("lesson08", "cross-attention-on-own-states", "decoder_layer",
            'lib.encoder_decoder_attention(y, memory, params["cross_attn"]',
            'lib.encoder_decoder_attention(y, y, params["cross_attn"]',
            {"test_decoder_layer"}, "the cross-attention fed the decoder's own states instead of the encoder's memory"),
    mistake("lesson08", "decoder-not-causal", "decoder_layer",
            'lib.decoder_self_attention(y, params["self_attn"], num_heads, tgt_mask)',
            'lib.encoder_self_attention(y, params["self_attn"], num_heads, tgt_mask)',
            {"test_decoder_layer"}, "the decoder's self-attention without the causal mask sees the future"),
    mistake("lesson08", "greedy-never-stops", "greedy_decode",
            "            if finished.all():\n                break\n", "",
            {"test_greedy_decode"}, "decoding goes on to max_len after every sequence produced the end symbol"),
    mistake("lesson08", "greedy-reads-first-position", "greedy_decode",
            "logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)",
            {"test_greedy_decode"}, "the first position's prediction every step: the tokens fed back are never used"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "unbiased-variance",
    "residual-forgotten",
    "decoder-not-causal",
]
