"""System accounts for the class: one per roster line, plus the course's grader account.

The operating system keeps students apart: each account has a private home (0700), so a student
cannot read another's work, and nobody but the grader can read the course folder or the
gradebook. Accounts that already exist are left as they are (a class server may have them);
the ones made here are recorded in the hub's state folder, so ``remove`` deletes only those.

Each new account gets its own random password (PAM checks it when the student logs in to the
hub; ``passwd`` in a JupyterLab terminal changes it). A password shared by everyone is for a demo
on loopback only: it is recorded, and the hub refuses to listen on any other address while it is.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import time
from pathlib import Path

RECORD = "accounts.json"  # in the hub's state folder: {"made": [...], "shared_password": bool}
PASSWORDS = "passwords.csv"  # username,password of the accounts made here (root only: 0600)


class AccountError(RuntimeError):
    pass


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def _run(*argv: str, stdin: str | None = None) -> None:
    # useradd and friends lock /etc/passwd; another program doing the same makes them fail at
    # once with exit status 10 ("cannot lock"), so try again for a while.
    for _ in range(50):
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        if done.returncode != 10 and "lock" not in done.stderr:
            break
        time.sleep(0.2)
    raise AccountError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")


def make(name: str, home_base: Path) -> None:
    """A new account ``name`` with its own group and a private home under ``home_base``."""
    _run("useradd", "--create-home", "--base-dir", str(home_base), "--shell", "/bin/bash",
         "--user-group", name)  # fmt: skip
    os.chmod(home(name), 0o700)


def set_passwords(passwords: dict[str, str]) -> None:
    if passwords:
        _run("chpasswd", stdin="".join(f"{u}:{p}\n" for u, p in passwords.items()))


def remove(name: str) -> None:
    """Delete the account and its home (its processes must have been stopped)."""
    if exists(name):
        _run("userdel", "--remove", name)


def new_password() -> str:
    return secrets.token_urlsafe(12)


def read_record(state: Path) -> dict:
    path = state / RECORD
    return json.loads(path.read_text()) if path.exists() else {"made": [], "shared_password": False}


def write_record(state: Path, record: dict) -> None:
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    (state / RECORD).write_text(json.dumps(record, indent=1))


def read_passwords(state: Path) -> dict[str, str]:
    path = state / PASSWORDS
    if not path.exists():
        return {}
    return dict(line.split(",", 1) for line in path.read_text().splitlines() if "," in line)


def write_passwords(state: Path, passwords: dict[str, str]) -> None:
    path = state / PASSWORDS
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    path.write_text("".join(f"{u},{p}\n" for u, p in sorted(passwords.items())))


def ensure_grader(name: str, home_base: Path, state: Path) -> None:
    """The course's grader account: no password (nobody logs in as it; the hub runs formgrader
    as it, and instructors reach that), recorded like the others so ``remove`` deletes it."""
    if not exists(name):
        record = read_record(state)
        make(name, home_base)
        record["made"].append(name)
        write_record(state, record)


def ensure(
    names: list[str], home_base: Path, state: Path, shared: str | None = None, renew: bool = False
) -> dict[str, str]:
    """Make the accounts in ``names`` that do not exist yet; return {username: password} of every
    account made here (so far). ``shared``: one password for every new account (loopback demos);
    ``renew``: a new random password for every account made here, ending any shared one."""
    record, passwords = read_record(state), read_passwords(state)
    home_base.mkdir(parents=True, exist_ok=True)
    fresh = {}
    for name in names:
        if not exists(name):
            make(name, home_base)
            record["made"].append(name)
            fresh[name] = shared or new_password()
        elif renew and name in record["made"]:
            fresh[name] = new_password()
    if shared and fresh:
        record["shared_password"] = True
    elif renew:
        record["shared_password"] = False
    set_passwords(fresh)
    passwords.update(fresh)
    write_record(state, record)
    write_passwords(state, passwords)
    return {name: passwords[name] for name in names if name in passwords}
