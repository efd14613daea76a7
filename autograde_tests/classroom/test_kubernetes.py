"""The class on Kubernetes (classroom/kubernetes/) cannot run here (no cluster), so these tests
hold it to the one-server class it mirrors: the same course.toml and roster.csv (handed in at
install time, never copied), the same pins, the same paths; and the hub's extra configuration,
run against the real course files, gives the accounts, roles and volumes the page promises."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from traitlets.config import Config

from coursekit.classroom import settings
from coursekit.course.lessons import ROOT

pytestmark = pytest.mark.unit

K8S = ROOT / "classroom" / "kubernetes"
MOUNTED = "/srv/classroom"  # where the hub and the servers see course.toml and roster.csv


@pytest.fixture(scope="module")
def room() -> settings.Classroom:
    return settings.load(ROOT / "classroom" / "course.toml")


@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load((K8S / "jupyterhub-values.yaml").read_text())


@pytest.fixture(scope="module")
def dask_values() -> dict:
    return yaml.safe_load((K8S / "dask-values.yaml").read_text())


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    # a pin may carry a platform condition after ';' (triton: Linux only)
    pins = (line.split(";")[0] for line in lines if "==" in line and not line.startswith("#"))
    pairs = (pin.split("==", 1) for pin in pins)
    return {name.strip().lower(): version.strip() for name, version in pairs}


def test_the_image_installs_exactly_the_repositorys_pins():
    dockerfile = (K8S / "Dockerfile").read_text()
    python = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    version = next(d for d in python if isinstance(d, str) and d.startswith("python=")).split("=")[
        1
    ]
    assert re.search(rf"^FROM \S+:python-{re.escape(version)}\s*$", dockerfile, re.M), (
        f"the image's Python is not environment.yml's python={version}"
    )
    assert "-c constraints.txt" in dockerfile, "the image must install from the lock"
    makefile = (ROOT / "Makefile").read_text()
    extras = set(re.search(r"^ALL_EXTRAS := ([\w,]+)$", makefile, re.M).group(1).split(","))
    extras -= {"test"}
    installed = set(re.search(r'-e "\.\[([\w,]+)\]"', dockerfile).group(1).split(","))
    assert installed == extras, f"the image installs {installed}, make install {extras}"
    assert "classroom/learner" in dockerfile, "students' servers must get the learner's JupyterLab"


def test_the_hub_and_the_image_name_the_same_jupyterhub(values):
    header = (K8S / "jupyterhub-values.yaml").read_text()
    named = re.search(r"runs\s+JupyterHub ([\d.]+)", header)
    assert named and named.group(1) == _pins()["jupyterhub"], (
        "the chart's JupyterHub must be constraints.txt's (servers match their hub's version)"
    )


def test_course_and_roster_are_handed_in_not_copied(values):
    text = (K8S / "jupyterhub-values.yaml").read_text()
    for part in ("hub", "singleuser"):
        files = values[part]["extraFiles"]
        assert files["course"]["mountPath"] == f"{MOUNTED}/course.toml"
        assert files["roster"]["mountPath"] == f"{MOUNTED}/roster.csv"
        assert "stringData" not in files["course"] and "stringData" not in files["roster"]
        for name, source in (("course", "course.toml"), ("roster", "roster.csv")):
            flag = f"--set-file {part}.extraFiles.{name}.stringData=classroom/{source}"
            assert flag in text, f"the install command lacks {flag}"
    assert values["singleuser"]["extraEnv"]["CLASSROOM_COURSE"] == f"{MOUNTED}/course.toml"
    assert f"CLASSROOM_COURSE={MOUNTED}/course.toml" in (K8S / "Dockerfile").read_text()


def _run_extra_config(values, tmp_path) -> tuple[Config, dict]:
    """The hub's classroom configuration, run on a copy of the real course.toml and roster."""
    for name in ("course.toml", "roster.csv"):
        shutil.copy(ROOT / "classroom" / name, tmp_path / name)
    code = values["hub"]["extraConfig"]["classroom"].replace(MOUNTED, str(tmp_path))
    c = Config()
    namespace = {"c": c}
    exec(compile(code, "jupyterhub-values.yaml: hub.extraConfig.classroom", "exec"), namespace)
    return c, namespace


def test_the_hub_lets_in_the_roster_and_the_instructors_grade(values, room, tmp_path):
    c, _ = _run_extra_config(values, tmp_path)
    assert c.Authenticator.allowed_users == {m.username for m in room.roster} | {room.grader}
    assert c.Authenticator.admin_users == set(room.instructors)
    groups = c.JupyterHub.load_groups
    assert set(groups["instructors"]["users"]) == set(room.instructors)
    assert set(groups["students"]["users"]) == set(room.students)
    (role,) = c.JupyterHub.load_roles
    assert role["groups"] == ["instructors"]
    assert f"access:servers!user={room.grader}" in role["scopes"]
    assert room.course_id in role["description"]


def _spawner(name: str, volumes=(), mounts=()):
    return SimpleNamespace(
        user=SimpleNamespace(name=name),
        environment={},
        volumes=list(volumes),
        volume_mounts=list(mounts),
        default_url="/lab",
        notebook_dir=None,
    )


def test_only_the_graders_server_mounts_the_course(values, room, tmp_path):
    c, _ = _run_extra_config(values, tmp_path)
    hook = c.KubeSpawner.pre_spawn_hook
    grader = _spawner(room.grader)
    hook(grader)
    assert {"name": "course", "mountPath": str(room.folder)} in grader.volume_mounts
    assert grader.default_url == "/formgrader" and grader.notebook_dir == str(room.folder)
    assert "learner" not in grader.environment["JUPYTER_CONFIG_PATH"]
    for student in room.students:
        server = _spawner(student)
        hook(server)
        assert server.volume_mounts == [] and server.environment == {}, student
    shared = values["singleuser"]["storage"]["extraVolumeMounts"]
    assert [m["mountPath"] for m in shared] == [str(room.exchange)], (
        "every server mounts nbgrader's exchange (course.toml's root), and nothing else"
    )


def test_every_account_has_its_own_stable_uid(values, room, tmp_path):
    c, namespace = _run_extra_config(values, tmp_path)
    names = [room.grader, *(m.username for m in room.roster)]
    uids = [c.KubeSpawner.uid(_spawner(name)) for name in names]
    assert len(set(uids)) == len(uids) and min(uids) >= 20000
    assert namespace["uid_of"]("student1") == namespace["uid_of"]("student1")
    roster = (tmp_path / "roster.csv").read_text()
    (tmp_path / "roster.csv").write_text(roster + "zz-late,student\n")  # a student joins late
    _, again = _run_extra_config(values, tmp_path.parent / tmp_path.name)
    assert [again["uid_of"](n) for n in names] == uids, "a new student moved others' uids"


def test_dask_workers_run_the_class_image_and_see_the_course(values, dask_values, room):
    image = values["singleuser"]["image"]["name"]
    for part in ("scheduler", "worker"):
        assert dask_values[part]["image"]["repository"] == image, part
    (mount,) = dask_values["worker"]["mounts"]["volumeMounts"]
    assert mount["mountPath"] == str(room.folder), (
        "workers must see the course where the grader does"
    )
    (volume,) = dask_values["worker"]["mounts"]["volumes"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert claim in values["hub"]["extraConfig"]["classroom"], "the grader's course volume"
    assert dask_values["jupyter"]["enabled"] is False


def test_only_the_grader_reaches_the_scheduler(room):
    policy = yaml.safe_load((K8S / "networkpolicy.yaml").read_text())
    sources = policy["spec"]["ingress"][0]["from"]
    users = [s["podSelector"]["matchLabels"].get("hub.jupyter.org/username") for s in sources]
    assert room.grader in users and len([u for u in users if u]) == 1


def test_the_course_file_names_what_the_cluster_mounts(room):
    data = tomllib.loads((ROOT / "classroom" / "course.toml").read_text())
    assert data["course"]["roster"] == "roster.csv", "the hub reads the roster beside course.toml"
    assert Path(data["course"]["folder"]) == room.folder
