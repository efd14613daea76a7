"""Reference library of the course "Attention, from lookup to Transformer".

Each lesson's functions live twice, with the same names and signatures:

* ``attention_ref.np`` -- NumPy, the version the lessons build first;
* ``attention_ref.pt`` -- PyTorch, device-agnostic (runs where its inputs live).

Shapes are batch-leading: queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``,
values ``(..., n_k, d_v)``, weights ``(..., n_q, n_k)``, outputs ``(..., n_q, d_v)``.
The library depends on numpy and torch only, so it runs on a bare GPU machine too.
"""

__all__ = ["np", "pt"]
