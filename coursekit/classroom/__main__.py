"""python -m coursekit.classroom up | setup | remove -- a class on one server (as root).

up       set up (below), start JupyterHub, print its address and the accounts, run until ^C
setup    system accounts from the roster (private homes, own random passwords), the grader
         account and its course folder (a copy of this repository), nbgrader's exchange
remove   stop the class's processes and delete what setup made (accounts, homes, exchange,
         the hub's state); asks for --yes, since it deletes the class's work
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys

from coursekit.classroom import (
    accounts,
    coursefolder,
    hubconfig,
    hubprocess,
    leftovers,
    reach,
    settings,
)


def setup(room: settings.Classroom, shared: str | None = None, renew: bool = False) -> dict:
    """Everything the class needs besides the hub; {username: password} of the accounts made."""
    if shared and not room.loopback:
        raise settings.ClassroomError(
            f"a shared password is for a hub on loopback only, not on {room.ip}"
        )
    reach.require_reachable(room)  # before any account is made
    names = [m.username for m in room.roster]
    passwords = accounts.ensure(names, room.home_base, room.state, shared=shared, renew=renew)
    accounts.ensure_grader(room.grader, room.home_base, room.state)
    coursefolder.make_course_folder(room.folder, room.grader)
    coursefolder.make_exchange(room.exchange, room.course_id, room.grader)
    hubconfig.refuse_unsafe_address(room)
    return passwords


def remove(room: settings.Classroom) -> None:
    made = accounts.read_record(room.state)["made"]
    leftovers.stop_leftovers(room.state, room.course_id, spare_served=False)
    hubprocess.stop_processes_of(made)
    for name in made:
        accounts.remove(name)
    shutil.rmtree(room.exchange, ignore_errors=True)
    shutil.rmtree(room.state, ignore_errors=True)


def describe(room: settings.Classroom, passwords: dict[str, str]) -> str:
    lines = [
        f"JupyterHub for {room.course_id}: {room.url}",
        "",
        "accounts (username role password):",
    ]
    for member in room.roster:
        password = passwords.get(member.username, "(an existing account: its own password)")
        lines.append(f"  {member.username:<20} {member.role:<11} {password}")
    lines += [
        f"  {room.grader:<20} {'grader':<11} (no login: formgrader runs as it)",
        "",
        f"instructors: formgrader at {room.url}services/{room.course_id}/formgrader",
        f"  the grader's terminal: {room.url}services/{room.course_id}/lab"
        f" -> cd {room.folder} && make autograde LESSON=lesson01",
        f"passwords are kept in {room.state / accounts.PASSWORDS} (root only)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.classroom", description=__doc__)
    parser.add_argument("command", choices=("up", "setup", "remove"))
    parser.add_argument("--shared-password", help="one password for every new account (loopback)")
    parser.add_argument("--new-passwords", action="store_true", help="a new one for each account")
    parser.add_argument("--yes", action="store_true", help="remove: yes, delete the class")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print(
            "the classroom makes system accounts and runs JupyterHub: run it as root",
            file=sys.stderr,
        )
        return 2
    try:
        room = settings.load()
        if args.command == "remove":
            if not args.yes:
                print(f"this deletes every account {room.state} recorded, and their homes: --yes")
                return 2
            remove(room)
            return 0
        passwords = setup(room, args.shared_password, args.new_passwords)
    except (settings.ClassroomError, accounts.AccountError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "setup":
        print(describe(room, passwords))
        return 0
    return _serve(room, passwords)


def _serve(room: settings.Classroom, passwords: dict[str, str]) -> int:
    hub = hubprocess.Hub(room, room.state / "jupyterhub.log")
    try:
        seconds = hub.start()
    except hubprocess.HubError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for line in hub.recovered:
        print(line)
    print(describe(room, passwords))
    print(f"\nthe hub started in {seconds:.1f} s; its log: {hub.log}. Ctrl+C stops it.")
    # kill, and a closed terminal, stop it as Ctrl+C does (a hub left without its starter runs
    # on in its own session; the next start stops it: leftovers.py)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    try:
        return hub.wait()
    except KeyboardInterrupt:
        hub.stop()
        return 0


if __name__ == "__main__":
    sys.exit(main())
