"""The catalogue of bad submissions reads from its files (coursekit/democlass/attacks/), and an
attack file that would build something else than it says is refused with its name. What the
attacks do to grading is proven by autograde_tests/hostile/ (minutes); this is seconds."""

from __future__ import annotations

import ast
import string

import pytest
import yaml

from coursekit.democlass import badsubmissions

pytestmark = pytest.mark.unit


def test_every_attack_is_read_with_what_it_deserves():
    names = [k.name for k in badsubmissions.KINDS]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert all(k.expected is not None for k in badsubmissions.KINDS)
    assert badsubmissions.OS_KINDS and set(badsubmissions.OS_KINDS) <= set(names)
    assert {k.expected.status for k in badsubmissions.KINDS} <= {"graded", "held", "invalid"}


def _codes():
    for path in sorted(badsubmissions.ATTACKS.glob("[0-9][0-9]-*.yml")):
        spec = yaml.safe_load(path.read_text())
        for step in spec.get("steps", []):
            if "code" in step or "shared" in step:
                yield path.name, step


@pytest.mark.parametrize("attack, step", list(_codes()), ids=lambda v: str(v)[:30])
def test_every_step_is_python_once_its_placeholders_are_filled(attack, step):
    text = badsubmissions._SHARED[step["shared"]] if "shared" in step else step["code"]
    filled = string.Template(text).substitute(
        lesson_name="x", assignment="lesson01", name="f", attack="'a'", paths="['p']", port="9",
        passed_lines="print('t: passed')",
    )  # fmt: skip
    ast.parse(filled)


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"summary": "s", "start": "solved", "steps": [{"insert_aftr": "test 0"}]}, "exactly one"),
        ({"summary": "s", "build": "no-such-builder"}, "no builder 'no-such-builder'"),
        ({"summary": "s", "start": "somebody", "steps": []}, "start must be"),
        ({"summary": "s", "steps": [], "build": "symlink"}, "either build or"),
        ({"summary": "s", "build": "symlink", "expectd": {}}, "unknown key 'expectd'"),
    ],
)
def test_a_wrong_attack_file_is_refused_with_its_name(tmp_path, spec, problem):
    path = tmp_path / "99-broken.yml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match=f"99-broken.yml: .*{problem}"):
        badsubmissions._load(path)
