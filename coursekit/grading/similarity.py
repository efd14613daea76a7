"""How alike the class's answers are: pairwise similarity of what learners wrote in the solution
cells, the released code excluded, and an HTML report of the most similar pairs side by side.

The comparison is copydetect's (a well-kept library of the winnowing approach that MOSS uses).
Each answer is first normalised (coursekit.grading.normalise: comments, string statements and
dead statements dropped, spacing and literals written one way by ``ast.unparse``), then tokenized
by Pygments with every name, function name and string replaced by one letter (so renamed
variables change nothing), cut into k-grams of ``NOISE`` characters and hashed; the k-grams of
the released student edition's solution cells (the stubs every learner starts from, normalised
alike) are removed as boilerplate. The similarity of A to B is the share of A's fingerprinted
code that also occurs in B; a pair scores the larger of its two shares.

Each pair is compared twice: its whole answers, and exercise by exercise. A pair is *flagged*
when its whole answers score at least ``[similarity] threshold`` in course.toml (default
:data:`THRESHOLD`), or when at least ``exercises`` of its exercises (default :data:`EXERCISES`)
each score at least ``exercise_threshold`` (default :data:`EXERCISE_THRESHOLD`): a learner who
copied half the exercises and wrote the rest is found by the second. An exercise shorter than
:data:`EXERCISE_CODE` counts for its share of it: two learners who wrote a five-line softmax and
a one-line ``weights @ values`` alike did what independent learners do. ``archive`` names a folder
of earlier terms' submissions (each term a copy of nbgrader's submitted/ folder:
``<term>/<student>/<lesson>/<notebook>.ipynb``): every submission is compared with those too.

reports/<lesson>/similarity.html shows each flagged pair side by side, as compared, with the
shared code highlighted (never the released code; no internet needed to read it), and the
exercises alike; similarity.csv lists them. Similar is not copied: short exercises leave few ways
to write them, so read the code before you speak to anyone. What is caught and what is let pass
is measured on disguised copies the course's tests never planted and on its own independently
written correct answers (coursekit.democlass.detection; ``make grade-class`` prints both rates).
"""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

import nbformat
import numpy as np

from coursekit.course import coursefile
from coursekit.course.cells import grade_id, is_solution
from coursekit.course.coursefile import CourseFileError
from coursekit.grading.normalise import defined, normalise_answers

THRESHOLD = 0.75  # measured: see the module's docstring
EXERCISE_THRESHOLD = 0.9  # an exercise this alike ...
EXERCISES = 2  # ... in this many exercises flags a pair
# ... each counting for its share of this much code as compared (copydetect's filtered characters,
# about five lines): independent learners write short answers alike (a blind-written honest
# lesson 1 shared four of them with the course's, 30 to 118 characters each)
EXERCISE_CODE = 150
NOISE = 25  # copydetect's default k: matches shorter than this many filtered characters are noise
WINDOW = 1  # every k-gram is a fingerprint (copydetect's default guarantee = noise threshold)
SHOWN = 30  # pairs in the HTML report at most


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    shares: tuple[float, float]  # of the first's code found in the second's, and the reverse
    alike: tuple[tuple[str, float], ...] = ()  # exercises at the exercise threshold, and scores
    weight: float = 0.0  # how many exercises' worth of code those are (see EXERCISE_CODE)
    code: int = 0  # the shorter one's code as compared (copydetect's filtered characters)

    @property
    def score(self) -> float:
        return max(self.shares)


@dataclass(frozen=True)
class Settings:
    """``[similarity]`` of the class's course.toml."""

    threshold: float = THRESHOLD
    exercise_threshold: float = EXERCISE_THRESHOLD
    exercises: int = EXERCISES
    archive: Path | None = None  # earlier terms' submissions


def settings(course: Path | None = None) -> Settings:
    """``[similarity]`` of the class's course.toml (the defaults without one)."""
    path = coursefile.course_file(course)
    if not path.exists():
        return Settings()
    table = coursefile.table(coursefile.read(path), "similarity", path, required=False)
    unknown = set(table) - {"threshold", "exercise_threshold", "exercises", "archive"}
    if unknown:
        raise CourseFileError(f"{path}: [similarity] has unknown keys {sorted(unknown)}")
    found = {}
    for key, default in (("threshold", THRESHOLD), ("exercise_threshold", EXERCISE_THRESHOLD)):
        found[key] = float(coursefile.get(table, key, (int, float), path, default))
        if not 0 < found[key] <= 1:
            raise CourseFileError(f"{path}: [similarity] {key} = {found[key]}: must be in (0, 1]")
    found["exercises"] = coursefile.get(table, "exercises", int, path, EXERCISES)
    if found["exercises"] < 1:
        raise CourseFileError(f"{path}: [similarity] exercises = {found['exercises']}: at least 1")
    archive = coursefile.get(table, "archive", str, path, "")
    return Settings(**found, archive=(path.parent / archive) if archive else None)


def threshold(course: Path | None = None) -> float:
    """``[similarity] threshold`` of the class's course.toml (:data:`THRESHOLD` without one)."""
    return settings(course).threshold


def exercises_of(notebook, solution_ids: list[str]) -> dict[str, str]:
    """{grade_id: source} of the notebook's solution cells named in ``solution_ids``, in that
    order ("" for one it lacks)."""
    by_id = {grade_id(c): c.source for c in notebook.cells if grade_id(c) in solution_ids}
    return {gid: by_id.get(gid, "") for gid in solution_ids}


def answers(notebook, solution_ids: list[str]) -> str:
    """The notebook's solution cells (by grade_id, in ``solution_ids``' order), one text."""
    return "\n\n".join(exercises_of(notebook, solution_ids).values())


def released_answers(release) -> tuple[list[str], str]:
    """(the solution cells' grade_ids, their released text): what every learner starts from."""
    ids = [grade_id(c) for c in release.cells if is_solution(c) and c.cell_type == "code"]
    return ids, answers(release, ids)


def _fingerprint(code: str, boilerplate):
    from copydetect import CodeFingerprint

    return CodeFingerprint("answers.py", NOISE, WINDOW, boilerplate, True, "python",
                           fp=io.StringIO(code))  # fmt: skip


class _Answers:
    """One text's copydetect fingerprint, with its k-gram positions laid out as arrays."""

    def __init__(self, code: str, boilerplate):
        self.print = _fingerprint(code, boilerplate)
        index = self.print.hash_idx
        self.positions = np.array([i for h in index for i in index[h]], dtype=np.int64)
        self.hashes = np.repeat(
            np.array(list(index), dtype=np.int64), [len(index[h]) for h in index]
        )
        self.unique = np.unique(self.hashes)

    def share_in(self, other: _Answers) -> float:
        """copydetect's similarity of this text to ``other``: the copied code (its k-grams whose
        hash ``other`` has too, merged into slices by copydetect) over this text's coverage.
        The same number as ``copydetect.compare_files``, whose loop over shared hashes this
        replaces with one array lookup (autograde_tests/test_similarity.py checks they agree)."""
        from copydetect.utils import get_copied_slices

        if not other.unique.size:
            return 0.0
        at = np.minimum(np.searchsorted(other.unique, self.hashes), other.unique.size - 1)
        copied = self.positions[other.unique[at] == self.hashes]  # the hashes other has too
        if not self.print.token_coverage or not copied.size:
            return 0.0
        slices = get_copied_slices(copied, NOISE)
        return float(np.sum(slices[1] - slices[0]) / self.print.token_coverage)


def compare(texts: dict[str, str], boilerplate: str = "", wanted=None) -> list[Pair]:
    """Every pair of ``texts`` ({name: code}) (``wanted(a, b)``: only those), most similar first;
    each distinct text is fingerprinted once (a class hands in many copies of the released
    notebook)."""
    released = _fingerprint(boilerplate, None).hashes if boilerplate.strip() else set()
    common = np.array(sorted(released)) if released else None
    groups: dict[str, list[str]] = {}
    for name in sorted(texts):
        groups.setdefault(texts[name], []).append(name)
    found = {text: _Answers(text, common) for text in groups}
    written = [t for t in groups if found[t].positions.size]  # else nothing but released code
    pairs = []
    wanted = wanted or (lambda a, b: True)
    for text in written:
        same, code = (found[text].share_in(found[text]),) * 2, found[text].print.token_coverage
        pairs += [Pair(a, b, same, code=int(code)) for a, b in combinations(groups[text], 2)
                  if wanted(a, b)]  # fmt: skip
    for one, other in combinations(written, 2):
        between = [(a, b) for a in groups[one] for b in groups[other] if wanted(a, b)]
        if not between:
            continue
        shares = (found[one].share_in(found[other]), found[other].share_in(found[one]))
        code = int(min(found[one].print.token_coverage, found[other].print.token_coverage))
        for a, b in between:
            pairs.append(Pair(a, b, shares, code=code) if a < b
                         else Pair(b, a, shares[::-1], code=code))  # fmt: skip
    return sorted(pairs, key=lambda p: (-p.score, p.first, p.second))


def alike_exercises(
    by_learner: dict[str, dict[str, str]], stubs: dict[str, str], limit: float, wanted=None
) -> dict[tuple[str, str], tuple[tuple[tuple[str, float], ...], float]]:
    """{(first, second): (((exercise, score), ...), weight)}: the exercises in which a pair's
    answers score at least ``limit``, each exercise compared on its own, its stub left out, and
    how many exercises' worth of code they hold (each its shorter answer's share of
    :data:`EXERCISE_CODE`, at most 1)."""
    found: dict[tuple[str, str], list[tuple[str, float]]] = {}
    weights: dict[tuple[str, str], float] = {}
    for exercise, stub in stubs.items():
        texts = {who: cells.get(exercise, "") for who, cells in by_learner.items()}
        for pair in compare(texts, stub, wanted):
            if pair.score < limit:
                break  # most similar first
            key = (pair.first, pair.second)
            found.setdefault(key, []).append((exercise, pair.score))
            weights[key] = weights.get(key, 0.0) + min(1.0, pair.code / EXERCISE_CODE)
    return {key: (tuple(value), weights[key]) for key, value in found.items()}


def released_spans(code: str, boilerplate: str) -> list[tuple[int, int]]:
    """The character ranges of ``code`` that are the released code kept as given (the def lines,
    docstrings and set-up of each exercise): its lines that match the released text's, in order
    (difflib, line by line, surrounding spaces aside)."""
    import difflib

    lines = code.splitlines(keepends=True)
    starts = np.concatenate([[0], np.cumsum([len(line) for line in lines])])
    given = [line.strip() for line in boilerplate.splitlines()]
    matcher = difflib.SequenceMatcher(None, [line.strip() for line in lines], given, autojunk=False)
    return [(int(starts[a]), int(starts[a + n])) for a, _, n in matcher.get_matching_blocks() if n]


def _cut(slices: np.ndarray, spans: list[tuple[int, int]], code: str) -> np.ndarray:
    """copydetect's 2xN [start, end) character slices of ``code`` less the ``spans``, and less
    pieces that are only white space."""
    pieces = [(int(a), int(b)) for a, b in zip(*slices)]
    for low, high in spans:
        pieces = [
            p for a, b in pieces for p in ((a, min(b, low)), (max(a, high), b)) if p[0] < p[1]
        ]
    kept = [(a, b) for a, b in pieces if code[a:b].strip()]
    return np.array(kept, dtype=np.int64).T.reshape(2, -1)


def highlighted(first: str, second: str, boilerplate: str = "") -> tuple[str, str]:
    """The two texts as HTML, the code they share marked (copydetect's own comparison), the
    released code never marked: copydetect's matches are k-grams of the filtered code, where a
    docstring is one character, so a match that begins in the learner's own code reaches far
    into the def line and docstring next to it."""
    from copydetect import compare_files
    from copydetect.utils import highlight_overlap

    released = _fingerprint(boilerplate, None).hashes if boilerplate.strip() else set()
    common = np.array(sorted(released)) if released else None
    _, _, slices = compare_files(_fingerprint(first, common), _fingerprint(second, common))
    marked = []
    for code, cut in zip((first, second), slices):
        if len(cut) and cut.shape[-1]:
            cut = _cut(cut, released_spans(code, boilerplate) if boilerplate else [], code)
        if len(cut) == 0 or cut.shape[-1] == 0:
            marked.append(html.escape(code))
        else:
            marked.append(highlight_overlap(code, cut, "<mark>", "</mark>", escape_html=True)[0])
    return marked[0], marked[1]


@dataclass
class SimilarityReport:
    threshold: float
    pairs: list[Pair]  # every pair compared, most similar first
    texts: dict[str, str]  # what each learner wrote, as compared (normalised)
    released: str = ""  # what they were given (left out)
    exercise_threshold: float = EXERCISE_THRESHOLD
    exercises: int = EXERCISES
    earlier: int = 0  # submissions of earlier terms compared with this class's

    def is_flagged(self, pair: Pair) -> bool:
        return pair.score >= self.threshold or pair.weight >= self.exercises - 1e-9

    @property
    def flagged(self) -> list[Pair]:
        """The flagged pairs, the likest first (whole answers or an exercise)."""
        found = [p for p in self.pairs if self.is_flagged(p)]
        return sorted(found, key=lambda p: (-max([p.score, *(s for _, s in p.alike)]), p.first))

    def summary(self) -> str:
        n = len(self.texts) - self.earlier
        earlier = f", and {self.earlier} of earlier terms" if self.earlier else ""
        return (
            f"similarity of the answers (copydetect, threshold {self.threshold:g}, or "
            f"{self.exercises} exercises at {self.exercise_threshold:g}): "
            f"{len(self.flagged)} of {len(self.pairs)} pairs of {n} submissions{earlier} flagged"
        )


EARLIER = "earlier term"  # the names of archived submissions begin so: "earlier term 2025/ann"


def _earlier(archive: Path | None, lesson) -> dict[str, Path]:
    """{name: notebook} of the archived submissions of ``lesson`` (see the module's docstring)."""
    if archive is None or not archive.is_dir():
        return {}
    pattern = f"*/*/{lesson.assignment}/{lesson.name}.ipynb"
    return {f"{EARLIER} {p.parts[-4]}/{p.parts[-3]}": p for p in sorted(archive.glob(pattern))}


def similarity_of(
    answered: dict[str, dict[str, str]], stubs: dict[str, str], found: Settings = Settings()
) -> SimilarityReport:
    """The report on ``answered`` ({learner: {exercise: code}}, as handed in) given ``stubs``
    ({exercise: released code}, in the notebook's order): what :func:`class_similarity` reports
    of a class, and what coursekit.democlass.detection measures."""
    keep = set().union(*(defined(code) for code in stubs.values()))  # the exercises' functions
    stubs = normalise_answers(stubs, keep)
    by_learner = {
        name: normalise_answers({gid: cells.get(gid, "") for gid in stubs}, keep)
        for name, cells in answered.items()
    }

    def wanted(a: str, b: str) -> bool:  # never two earlier submissions with each other
        return not (a.startswith(EARLIER) and b.startswith(EARLIER))

    texts = {name: "\n\n".join(cells.values()) for name, cells in by_learner.items()}
    released = "\n\n".join(stubs.values())
    alike = alike_exercises(by_learner, stubs, found.exercise_threshold, wanted)
    pairs = [replace(p, alike=alike.get((p.first, p.second), ((), 0.0))[0],
                     weight=alike.get((p.first, p.second), ((), 0.0))[1])
             for p in compare(texts, released, wanted)]  # fmt: skip
    earlier = sum(name.startswith(EARLIER) for name in texts)
    return SimilarityReport(found.threshold, pairs, texts, released, found.exercise_threshold,
                            found.exercises, earlier)  # fmt: skip


def class_similarity(course: Path, lesson, students: list[str], limit: float | None = None):
    """The similarity of ``students``' submissions of ``lesson`` in ``course``, with each other
    and with the archive's (a notebook that cannot be read is left out)."""
    lesson = lesson.in_course(course)
    found = settings(course)
    if limit is not None:
        found = replace(found, threshold=limit)
    release = nbformat.read(lesson.student_notebook, 4)
    ids, _ = released_answers(release)
    notebooks = {s: lesson.submitted(s) for s in students} | _earlier(found.archive, lesson)
    answered = {}
    for name, path in notebooks.items():
        try:
            answered[name] = exercises_of(nbformat.read(path, 4), ids)
        except Exception:  # noqa: BLE001 -- screening reports unreadable submissions already
            continue
    return similarity_of(answered, exercises_of(release, ids), found)


# ---------------------------------------------------------------- the report's files


STYLE = """body{font-family:sans-serif;margin:1em 2em} table{border-collapse:collapse;width:100%}
td{vertical-align:top;width:50%;border:1px solid #ccc;padding:.3em}
pre{white-space:pre-wrap;font-size:12px;margin:0} mark{background:#ffd27f}
h2{font-size:1.1em;margin-top:2em}"""


def write_reports(folder: Path, report: SimilarityReport, title: str) -> Path:
    """similarity.csv (every flagged pair) and similarity.html (the most similar pairs side by
    side, shared code highlighted) in ``folder``; returns the HTML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "similarity.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["first", "second", "score", "share_of_first", "share_of_second",
                      "exercises_alike"])  # fmt: skip
        for p in report.flagged:
            alike = " ".join(f"{name}:{score:.3f}" for name, score in p.alike)
            out.writerow([p.first, p.second, f"{p.score:.3f}", f"{p.shares[0]:.3f}",
                          f"{p.shares[1]:.3f}", alike])  # fmt: skip
    shown = report.flagged[:SHOWN] or report.pairs[:3]
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(report.summary())}. Shown as compared: comments, string statements "
        "and dead statements dropped, spacing and numbers written one way. Highlighted: the code "
        "the two share, after names and strings are set aside; the released code is left out "
        "and never highlighted. Similar is not copied: read both before you speak to "
        "anyone.</p>",
    ]
    if not report.flagged:
        parts.append("<p>No pair reaches the threshold; the most similar pairs:</p>")
    for p in shown:
        left, right = highlighted(report.texts[p.first], report.texts[p.second], report.released)
        alike = ", ".join(f"{html.escape(name)} {score:.0%}" for name, score in p.alike)
        parts.append(
            f"<h2>{html.escape(p.first)} and {html.escape(p.second)}: {p.score:.0%} "
            f"({p.shares[0]:.0%} of {html.escape(p.first)}'s answers in the other's, "
            f"{p.shares[1]:.0%} the reverse)</h2>"
            + (f"<p>Exercises alike: {alike}</p>" if alike else "")
            + f"<table><tr><td><pre>{left}</pre></td><td><pre>{right}</pre></td></tr></table>"
        )
    page = folder / "similarity.html"
    page.write_text("\n".join(parts + ["</body></html>"]), encoding="utf-8")
    return page
