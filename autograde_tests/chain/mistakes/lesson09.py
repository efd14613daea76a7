"""Lesson 9, Efficient attention: planted mistakes and the test cells that must catch them.

Each exercise stands alone (Exercise 3's tests build their inputs with the notebook's own
attention_with_lse, not with the learner's tiled attention; the KV-cache demo after Exercise 5
uses the learner's cached_self_attention but grades nothing), so no mistake cascades.
"""

from . import mistake

MISTAKES = [
    mistake("lesson09", "running-sum-not-rescaled", "online_softmax",
            "running_sum = running_sum * np.exp(running_max - new_max) + np.exp(x - new_max)",
            "running_sum = running_sum + np.exp(x - new_max)",
            {"test_online_softmax"}, "terms taken against an old maximum are summed with new ones"),
    mistake("lesson09", "minus-inf-minus-inf", "online_softmax",
            "        if new_max == -np.inf:  # only -inf so far: nothing to add yet\n            continue\n", "",
            {"test_online_softmax"}, "a row starting with -inf computes exp(-inf - (-inf)) = NaN"),
    mistake("lesson09", "output-not-rescaled", "tiled_attention",
            "acc = acc * alpha + weights @ values[..., start:stop, :]",
            "acc = acc + weights @ values[..., start:stop, :]",
            {"test_tiled_attention"}, "the running sum is rescaled but the accumulated output is not"),
    mistake("lesson09", "inclusive-block-end", "tiled_attention",
            "stop = min(start + block_size, n_k)", "stop = min(start + block_size - 1, n_k)",
            {"test_tiled_attention"}, "off by one: the last key of every block is skipped"),
    mistake("lesson09", "fully-masked-nan", "tiled_attention",
            "shift = np.where(np.isfinite(new_max), new_max, 0.0)", "shift = new_max",
            {"test_tiled_attention"}, "exp(-inf - (-inf)) = NaN for queries whose keys so far are all masked"),
    mistake("lesson09", "all-scores-at-once", "tiled_attention",
            "    for start in range(0, n_k, block_size):",
            "    block_size = n_k  # one block: the whole score matrix at once\n"
            "    for start in range(0, n_k, block_size):",
            {"test_tiled_attention"}, "correct numbers, but the n x n scores are all in memory: no tiling"),
    mistake("lesson09", "merge-overflows", "merge_attention",
            "    weight_a = np.exp(lse_a - shift)[..., None]\n    weight_b = np.exp(lse_b - shift)[..., None]",
            "    weight_a = (np.exp(lse_a) / (np.exp(lse_a) + np.exp(lse_b)))[..., None]\n"
            "    weight_b = (np.exp(lse_b) / (np.exp(lse_a) + np.exp(lse_b)))[..., None]",
            {"test_merge_attention"}, "exp(lse) overflows for scores in the hundreds"),
    mistake("lesson09", "torch-scores-not-scaled", "tiled_attention_torch",
            "scores = queries @ keys[..., start:stop, :].transpose(-1, -2) / math.sqrt(queries.shape[-1])",
            "scores = queries @ keys[..., start:stop, :].transpose(-1, -2)",
            {"test_tiled_attention_torch"}, "the 1/sqrt(d_k) of Eq. (1) forgotten"),
    mistake("lesson09", "torch-sum-not-rescaled", "tiled_attention_torch",
            "running_sum = running_sum * alpha + weights.sum(dim=-1, keepdim=True)",
            "running_sum = running_sum + weights.sum(dim=-1, keepdim=True)",
            {"test_tiled_attention_torch"}, "the accumulated output is rescaled but the running sum is not"),
    mistake("lesson09", "cache-appended-twice", "cached_self_attention",
            'heads = ref_pt.scaled_dot_product_attention(q, cache["k"], cache["v"])',
            'heads = ref_pt.scaled_dot_product_attention(q, torch.cat([cache["k"], k_new], dim=-2), '
            'torch.cat([cache["v"], v_new], dim=-2))',
            {"test_cached_self_attention"}, "the new key and value appended to the cache, then once more"),
    mistake("lesson09", "cache-causal-mask-top-left", "cached_self_attention",
            'heads = ref_pt.scaled_dot_product_attention(q, cache["k"], cache["v"])',
            'heads = ref_pt.scaled_dot_product_attention(q, cache["k"], cache["v"], '
            'ref_pt.causal_mask(1, cache["k"].shape[-2], device=q.device))',
            {"test_cached_self_attention"}, "a causal mask aligned at the top left: a lone query sees key 0 only"),
    mistake("lesson09", "cache-not-kept", "cached_self_attention",
            'cache["k"] = k_new if "k" not in cache else torch.cat([cache["k"], k_new], dim=-2)',
            'cache["k"] = k_new',
            {"test_cached_self_attention"}, "only the newest key is kept: each step attends to itself"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "running-sum-not-rescaled",
    "fully-masked-nan",
    "cache-appended-twice",
]
