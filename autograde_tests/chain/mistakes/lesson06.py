"""Lesson 6, The position-wise feed-forward network: planted mistakes and the test cells that
must catch them.

Exercise 6 (layer_parameter_counts) builds on the learner's ffn_parameter_count, so counting the
FFN without its biases also costs Exercise 6's points: that cascade is declared here, and it is
what a learner would see.
"""

from . import mistake

MISTAKES = [
    mistake("lesson06", "relu-forgotten", "position_wise_ffn",
            'hidden = np.maximum(0.0, x @ params["w_1"] + params["b_1"])',
            'hidden = x @ params["w_1"] + params["b_1"]',
            {"test_position_wise_ffn"}, "two linear maps without the ReLU collapse into one"),
    mistake("lesson06", "b1-after-relu", "position_wise_ffn",
            'hidden = np.maximum(0.0, x @ params["w_1"] + params["b_1"])',
            'hidden = np.maximum(0.0, x @ params["w_1"]) + params["b_1"]',
            {"test_position_wise_ffn"}, "b_1 added outside the ReLU: max(0, xW_1) + b_1"),
    mistake("lesson06", "permutation-is-enough", "acts_position_wise",
            "    for t in range(x.shape[0]):\n"
            "        if not np.allclose(fn(x[t:t + 1]), whole[t:t + 1]):\n"
            "            return False\n"
            "    return True",
            "    perm = np.random.default_rng(0).permutation(x.shape[0])\n"
            "    return np.allclose(fn(x[perm]), whole[perm])",
            {"test_acts_position_wise"}, "commuting with a permutation taken for position-wise: self-attention passes"),
    mistake("lesson06", "first-position-skipped", "acts_position_wise",
            "for t in range(x.shape[0]):", "for t in range(1, x.shape[0]):",
            {"test_acts_position_wise"}, "the loop of lesson 3's leakage test, which starts at 1, reused"),
    mistake("lesson06", "torch-relu-after-second-layer", "position_wise_ffn_torch",
            'hidden = torch.relu(x @ params["w_1"] + params["b_1"])\n'
            '    return hidden @ params["w_2"] + params["b_2"]',
            'hidden = x @ params["w_1"] + params["b_1"]\n'
            '    return torch.relu(hidden @ params["w_2"] + params["b_2"])',
            {"test_position_wise_ffn_torch"}, "the ReLU applied to the output instead of the hidden layer"),
    mistake("lesson06", "conv-input-not-transposed", "ffn_conv1d",
            "channels = x.transpose(-1, -2)", "channels = x",
            {"test_ffn_conv1d"}, "(batch, n, d_model) handed to a convolution that wants (batch, channels, length)"),
    mistake("lesson06", "conv-kernel-not-transposed", "ffn_conv1d",
            'kernel_1 = params["w_1"].T.unsqueeze(-1)', 'kernel_1 = params["w_1"].unsqueeze(-1)',
            {"test_ffn_conv1d"}, "w_1 (in, out) used as a Conv1d weight, which is (out_channels, in_channels, 1)"),
    mistake("lesson06", "parameters-without-biases", "ffn_parameter_count",
            "    return weights + biases", "    return weights",
            {"test_ffn_parameter_count", "test_layer_parameter_counts"},
            "b_1 and b_2 not counted (and so not in the layer's FFN part either)"),
    mistake("lesson06", "layer-norm-without-bias", "layer_parameter_counts",
            '"norms": norms * 2 * d_model}', '"norms": norms * d_model}',
            {"test_layer_parameter_counts"}, "a LayerNorm has a gain and a bias, d_model each"),
    mistake("lesson06", "decoder-without-cross-attention", "layer_parameter_counts",
            "attentions, norms = (2, 3) if decoder else (1, 2)", "attentions, norms = (1, 3) if decoder else (1, 2)",
            {"test_layer_parameter_counts"}, "a decoder layer's encoder-decoder attention forgotten"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "relu-forgotten",
    "conv-input-not-transposed",
    "parameters-without-biases",
]
