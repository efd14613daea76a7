"""What an instructor and a student do in the browser: formgrader's buttons and JupyterLab's
Assignments tab, each step kept as a screenshot (conftest.SHOTS)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

SLOW = 240_000  # ms: a server starting, or nbgrader running a notebook, on 2 busy cores


class Steps:
    """Numbered screenshots: build/classroom-screenshots/NN-what.png."""

    def __init__(self, folder: Path):
        self.folder, self.count = folder, 0
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)

    def shot(self, page: Page, what: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.count:02d}-{what}.png"
        page.screenshot(path=str(path))
        return path


def log_in(page: Page, hub_url: str, user: str, password: str) -> None:
    page.goto(f"{hub_url}hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_load_state()


# ---------------------------------------------------------------- formgrader (instructors)


def formgrader(page: Page, hub_url: str, course: str, view: str = "manage_assignments") -> None:
    page.goto(f"{hub_url}services/{course}/formgrader/{view}")
    page.wait_for_selector("table tbody tr", timeout=SLOW)
    page.get_by_text("Loading, please wait...").wait_for(state="detached", timeout=SLOW)


def formgrader_action(page: Page, lesson: str, column: str) -> str:
    """Click ``column``'s button (assign, release, collect, generate-feedback,
    release-feedback) in ``lesson``'s row; return the success dialog's text."""
    page.locator("tr", has_text=lesson).locator(f"td.{column} a").click()
    dialog = page.locator("#success-modal, #error-modal")
    dialog.wait_for(state="visible", timeout=SLOW)
    text = dialog.inner_text()
    assert dialog.get_attribute("id") == "success-modal", text
    return text


def close_dialog(page: Page) -> None:
    page.locator("#success-modal .modal-footer button").click()
    page.locator("#success-modal").wait_for(state="detached", timeout=30_000)


# ---------------------------------------------------------------- JupyterLab (students)


def open_lab(page: Page, hub_url: str, user: str) -> None:
    if "/spawn-pending/" not in page.url and f"/user/{user}/" not in page.url:
        page.goto(f"{hub_url}hub/spawn/{user}")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=SLOW)
    page.goto(f"{hub_url}user/{user}/lab?reset")  # not the tabs of a previous visit
    page.wait_for_selector(".jp-LauncherCard", timeout=SLOW)


def nbgrader_menu(page: Page) -> list[str]:
    """The items of JupyterLab's Nbgrader menu (closed again)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
    return [item for item in items if item.strip()]


def open_assignments(page: Page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    page.locator("#refresh_assignments_list").click()
    page.wait_for_selector("#released_assignments_list_loading", state="hidden", timeout=SLOW)


def fetch(page: Page, lesson: str) -> None:
    row = page.locator("#released_assignments_list .list_item", has_text=lesson)
    row.get_by_role("button", name="Fetch").click()
    expect(page.locator("#fetched_assignments_list .list_item", has_text=lesson)).to_be_visible(
        timeout=SLOW
    )


def show_notebooks(page: Page, lesson: str) -> None:
    """Unfold the fetched lesson's notebooks (each with its Validate button)."""
    page.locator("#fetched_assignments_list a", has_text=lesson).first.click()
    page.get_by_role("button", name="Validate").first.wait_for(timeout=30_000)


def validate(page: Page) -> str:
    page.get_by_role("button", name="Validate").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=SLOW)
    return dialog.inner_text()


def dismiss(page: Page) -> None:
    page.locator(".jp-Dialog .jp-Dialog-button").last.click()
    page.locator(".jp-Dialog").wait_for(state="detached", timeout=30_000)


def submit(page: Page, lesson: str) -> None:
    row = page.locator("#fetched_assignments_list .list_item", has_text=lesson).first
    row.get_by_role("button", name="Submit").click()
    expect(page.locator("#submitted_assignments_list .list_item", has_text=lesson)).to_be_visible(
        timeout=SLOW
    )


def open_notebook(page: Page, hub_url: str, user: str, path: str) -> None:
    page.goto(f"{hub_url}user/{user}/lab/tree/{path}")
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=SLOW)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=SLOW)


def replace_line(page: Page, marker: str, line: str, new: str) -> None:
    """In the code cell containing ``marker``, type ``new`` over the line that reads ``line``."""
    cell = page.locator(".jp-CodeCell", has_text=marker).first
    cell.locator(".cm-line", has_text=line).click()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Home")
    page.keyboard.type(new)
    expect(cell.locator(".cm-content")).to_contain_text(new)


def replace_cell(page: Page, marker: str, source: str) -> None:
    """Put ``source`` in place of the code cell containing ``marker`` (pasted, not typed: no
    editor indentation added), and see it there."""
    cell = page.locator(".jp-CodeCell", has_text=marker).first
    editor = cell.locator(".cm-content")
    editor.click()
    expect(editor).to_be_focused()  # else Ctrl+A would select the notebook's cells
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)
    first = next(line.strip() for line in source.splitlines() if line.strip())
    expect(page.locator(".jp-CodeCell .cm-content", has_text=first)).to_have_count(1)


def run_cell(page: Page, marker: str, steps: Steps | None = None) -> str:
    """Run the code cell containing ``marker``; its first output. Where none comes, what the
    page showed (a screenshot with ``steps``) and the kernel's state say why."""
    cell = page.locator(".jp-CodeCell", has_text=marker).first
    prompt = cell.locator(".jp-InputPrompt").first
    for _ in range(3):
        cell.locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        # Seen once in CI on a loaded machine: the keypress moved the selection on, but the cell
        # never ran (prompt still "[ ]:", kernel idle). A cell that started shows [*] or [n].
        try:
            expect(prompt).not_to_have_text(re.compile(r"^\s*\[ \]:\s*$"), timeout=30_000)
            break
        except AssertionError:
            continue
    output = cell.locator(".jp-OutputArea-output")
    try:
        output.first.wait_for(timeout=SLOW)
    except PlaywrightTimeout:
        shot = steps.shot(page, "FAILED-run-cell") if steps else None
        status = page.locator(".jp-Notebook-ExecutionIndicator").first.get_attribute("data-status")
        shown = prompt.inner_text()
        found = page.locator(".jp-CodeCell", has_text=marker).count()
        raise AssertionError(
            f"the cell with {marker!r} gave no output in {SLOW / 1000:.0f} s: kernel {status}, "
            f"prompt {shown!r} (Shift+Enter pressed up to 3 times), cells with it: {found}; "
            f"screenshot {shot}"
        ) from None
    return output.first.inner_text()


def save(page: Page, path: Path, expected: str) -> None:
    page.keyboard.press("Control+s")
    for _ in range(120):
        if path.exists() and expected in path.read_text():
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"{path} was not saved with {expected!r}")


def fetch_feedback(page: Page, lesson: str) -> None:
    row = page.locator("#submitted_assignments_list .list_item", has_text=lesson).first
    row.get_by_role("button", name="Fetch Feedback").click()
    expect(page.get_by_text("(view feedback)").first).to_be_visible(timeout=SLOW)


def own_files(user_home: Path) -> list[Path]:
    return [p for p in user_home.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts]
