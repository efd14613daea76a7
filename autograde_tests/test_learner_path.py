"""The learner's path, in a real JupyterLab in Chromium: a fresh clone, `make lab`, a wrong answer,
its message on the first screen, a right answer, the answer broken again (no ✓ for the definition
left in the kernel), a skipped cell named, and the attention viewer.

The clone shares this repository's .venv (a fresh one would install gigabytes); its
pyproject.toml and constraints.txt are dated back so that make sees the environment as current,
as it would be after a learner's first `make lab`. The server listens on a free port of
127.0.0.1 with its own token, and the test stops it (and its kernels) at the end.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import torch

from coursekit.course.lessons import ROOT

pytestmark = [pytest.mark.make, pytest.mark.browser]
WRONG = "def causal_mask(n_q, n_k=None):\n    n_k = n_q if n_k is None else n_k\n    return np.tril(np.ones((n_q, n_k)))"  # noqa: E501
RIGHT = WRONG.replace("np.ones((n_q, n_k))", "np.ones((n_q, n_k), dtype=bool)")
VIEWER = """from attention_ref.pt.lm import CharTokenizer, TransformerLM, zen_of_python
from attention_ref.viewer import AttentionView
view_tokenizer = CharTokenizer(zen_of_python())
view_model = TransformerLM(view_tokenizer.vocab_size, generator=torch.Generator().manual_seed(3))
with torch.no_grad():
    _, view_weights = view_model(view_tokenizer.encode(zen_of_python()[:20])[None], return_weights=True)
AttentionView([w[0] for w in view_weights], list(zen_of_python()[:20]), title="lesson 10's model")"""  # noqa: E501


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` in a fresh clone: (its address with the token, what it printed, seconds to it)."""
    clone = tmp_path_factory.mktemp("learner") / "course"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    for name in ("pyproject.toml", "constraints.txt"):
        os.utime(clone / name, (946684800, 946684800))  # 2000: older than the stamps
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    # its own JupyterLab settings and workspace: none of this user's open tabs come back
    flags = (f"--no-browser --ip=127.0.0.1 --port={port} --LabApp.workspaces_dir={clone}/.lab "
             f"--LabApp.user_settings_dir={clone}/.lab")  # fmt: skip
    server = subprocess.Popen(
        ["make", "lab", f"LAB_FLAGS={flags}"],
        cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    printed, address = [], None
    try:
        for line in server.stdout:  # until the address, which comes last
            printed.append(line.rstrip("\n"))
            found = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=\w+)", line)
            if found:
                address = found.group(1)
                break
        assert address, "\n".join(printed)
        seconds = time.monotonic() - started
        later = []  # what the server says while the browser works (read, or its pipe fills up)
        threading.Thread(target=lambda: later.extend(server.stdout), daemon=True).start()
        yield address, printed, seconds, later
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server, its kernels: everything make started
        server.wait(timeout=60)


def test_make_lab_starts_at_once_with_its_notices_next_to_the_address(lab):
    _, printed, seconds, _ = lab
    text = "\n".join(printed)
    assert "wrote notebooks" not in text and "generate_assignment" not in text, text
    assert "your own copies of lesson01" in text and "Save a notebook (Ctrl+S)" in text
    notices = [i for i, line in enumerate(printed) if line.startswith("make lab:")]
    assert len(printed) - notices[-1] <= 8, text  # Jupyter's own lines: the address block only
    print(f"make lab on a fresh clone: the address after {seconds:.1f} s")


def _cell(page, text: str):
    return page.locator(".jp-CodeCell", has_text=text).first


def _type_into(page, cell, code: str) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)


def _run(page, cell) -> None:
    """Run ``cell`` (Shift+Enter from its editor) and wait until its prompt shows a number."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    cell.locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for(timeout=120_000)


def test_a_learners_wrong_answer_then_right_answer_then_the_viewer(lab, browser):
    address, _, _, later = lab
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(address.replace("/lab?", "/lab/tree/lesson03/masking.ipynb?"))
        imports = _cell(page, "import numpy as np")
        imports.wait_for(timeout=120_000)
        assert not page.get_by_role("menuitem", name="Nbgrader").count(), "no Nbgrader menu alone"
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)
        page.wait_for_timeout(1500)  # the kernel's language_info has been written by now
        dirty = page.locator(".lm-TabBar-tab.jp-mod-dirty", has_text="masking.ipynb")
        assert not dirty.count(), "opening the notebook marked it modified"
        _run(page, imports)

        answer, test = (
            _cell(page, "def causal_mask("),
            _cell(page, "expect_own_function(causal_mask"),
        )
        _type_into(page, answer, WRONG)
        _run(page, answer)
        _run(page, test)
        error = test.locator(".jp-OutputArea-output").first
        error.wait_for(timeout=60_000)
        text = error.inner_text()
        assert text.startswith("AssertionError: causal_mask(3) is a boolean mask"), text
        assert "Hint: 0/1 numbers are not a boolean mask" in text and "attention_ref" not in text
        error.scroll_into_view_if_needed()
        # The message is on the output's first screen: its first line, right at its top.
        top = error.evaluate("""el => {
            const pre = el.querySelector('pre') || el, range = document.createRange();
            const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
            let node = walker.nextNode();
            while (node && !node.textContent.includes('AssertionError')) node = walker.nextNode();
            range.setStart(node, node.textContent.indexOf('AssertionError'));
            range.setEnd(node, node.textContent.indexOf('AssertionError') + 14);
            const box = range.getBoundingClientRect();
            return [box.top - el.getBoundingClientRect().top, box.bottom, window.innerHeight];
        }""")
        assert top[0] < 30 and top[1] <= top[2], top

        _type_into(page, answer, RIGHT)
        _run(page, answer)
        _run(page, test)
        passed = test.locator(".jp-OutputArea-output").first
        passed.wait_for(timeout=60_000)
        assert passed.inner_text().strip() == "\u2713 passed: every check in this cell holds"
        assert not test.locator("[data-mime-type='application/vnd.jupyter.stderr']").count()

        _no_pass_for_an_answer_that_no_longer_runs(page, answer, test)
        _a_skipped_cell_is_named(page)
        _viewer_in_jupyterlab(page)
        # the kernel ran over a Unix socket: not one "running over TCP without encryption"
        assert not [line for line in later if "without encryption" in line], later
    finally:
        context.close()


def _output_text(cell) -> str:
    output = cell.locator(".jp-OutputArea-output").first
    output.wait_for(timeout=60_000)
    return output.inner_text()


def _no_pass_for_an_answer_that_no_longer_runs(page, answer, test) -> None:
    """The answer cell broken by a SyntaxError after it ran: its test names the cell to fix,
    where it used to print ✓ for the definition still in the kernel; fixed, ✓ again."""
    _type_into(page, answer, RIGHT.replace("dtype=bool)", "dtype=bool"))  # a ( left open
    _run(page, answer)
    assert "SyntaxError" in _output_text(answer)
    _run(page, test)
    shown = _output_text(test)
    assert re.match(
        r"AssertionError: your cell that defines causal_mask \(In \[\d+\]\) did not run to the "
        r"end: it raised SyntaxError: .*causal_mask is still the older definition",
        shown,
    ), shown
    assert "Hint: fix that cell and run it first" in shown and "\u2713" not in shown
    _type_into(page, answer, RIGHT)
    _run(page, answer)
    _run(page, test)
    assert _output_text(test).strip() == "\u2713 passed: every check in this cell holds"


def _a_skipped_cell_is_named(page) -> None:
    """A name that a given cell further down binds, used before that cell ran: the NameError
    says which cell to run."""
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    cell = page.locator(".jp-Notebook-cell.jp-mod-active").element_handle()
    page.keyboard.press("Enter")
    page.keyboard.insert_text("mask_image")
    page.keyboard.press("Shift+Enter")
    shown = cell.wait_for_selector(".jp-OutputArea-output", timeout=60_000).inner_text()
    assert shown.startswith("NameError: name 'mask_image' is not defined"), shown
    assert 'Hint: cells above this one define it (the first under "2. The causal mask")' in shown


def _viewer_in_jupyterlab(page) -> None:
    """A new cell shows the viewer; hovering and focusing tokens show the model's numbers."""
    page.keyboard.press("Escape")  # command mode
    page.keyboard.press("b")  # a new cell below the active one
    cell = page.locator(".jp-Notebook-cell.jp-mod-active").element_handle()
    page.keyboard.press("Enter")
    page.keyboard.insert_text(VIEWER)
    page.keyboard.press("Shift+Enter")
    view = cell.wait_for_selector(".attention-view", timeout=120_000)
    from attention_ref.pt.lm import CharTokenizer, TransformerLM, zen_of_python

    tokenizer = CharTokenizer(zen_of_python())
    model = TransformerLM(tokenizer.vocab_size, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _, weights = model(tokenizer.encode(zen_of_python()[:20])[None], return_weights=True)
    want = torch.stack([w[0] for w in weights]).numpy()

    def shown():
        return np.array(
            view.evaluate("""v => Array.from(v.querySelectorAll('tbody tr')).map(
                tr => Array.from(tr.querySelectorAll('td'), td => Number(td.dataset.weight)))""")
        )

    view.query_selector_all(".av-query")[6].hover()
    np.testing.assert_allclose(shown(), want[0, :, 6], rtol=1e-4, atol=1e-6)
    view.query_selector_all(".av-layer")[1].click()
    view.query_selector_all(".av-query")[6].focus()
    page.keyboard.press("ArrowLeft")
    np.testing.assert_allclose(shown(), want[1, :, 5], rtol=1e-4, atol=1e-6)
