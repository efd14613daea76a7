"""What screening finds: a kind, a severity (invalid, review, note), a message and where."""

from __future__ import annotations

from dataclasses import asdict, dataclass

SEVERITIES = ("invalid", "review", "note")
META = "coursekit"  # the notebook metadata key under which the grader records its findings


@dataclass(frozen=True)
class Finding:
    kind: str  # short id, e.g. "monkeypatch", "renamed-notebook"
    severity: str  # "invalid", "review" or "note"
    message: str  # what was found and what it means, for the instructor
    where: str = ""  # e.g. "cell soft_lookup, line 3: np.allclose = ..."

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        return cls(**{k: data.get(k, "") for k in ("kind", "severity", "message", "where")})

    def __str__(self) -> str:
        return f"[{self.severity}] {self.kind}: {self.message}" + (
            f" ({self.where})" if self.where else ""
        )


def worst(findings) -> str | None:
    """The most serious severity among ``findings`` (None when there are none)."""
    levels = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in levels), None)
