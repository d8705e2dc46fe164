"""Scripted replica processes for the coordinator's tests: mmrun.backends.replicas.Replicas
starts them in place of mmrun.backends.replicas.replica_main (same arguments), so the coordinator's side of
the protocol is tested against replicas that behave exactly as a test needs, without an
engine. Module-level functions: the "spawn" start method imports them by name."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from mmrun.outcome import Completion


def first_dies_after_asking(
    conn: Any, recipe: Any, replica: Any, quiet: bool, verbose: bool = False
) -> None:
    """Replica 0 asks for prompts and is gone before the answer (its end of the pipe shut for
    reading: the coordinator's reply fails with a broken pipe, every time); every other
    replica answers each prompt it is given."""
    if replica.index == 0:
        conn.send(("ready", None))
        socket.socket(fileno=os.dup(conn.fileno())).shutdown(socket.SHUT_RD)
        conn.send(("want", 8))
        time.sleep(60)  # until the coordinator kills it
        os._exit(1)
    answer_each(conn, 8, lambda item: f"answer to {item.id}")


def every_one_answers(
    conn: Any, recipe: Any, replica: Any, quiet: bool, verbose: bool = False
) -> None:
    """Each replica answers each prompt it is given with its id, the replica's index and
    the max_tokens of the plan it was started with (its recipe's sampling)."""
    max_tokens = recipe.sampling.get("max_tokens")
    # A pause after each answer: the other replica asks in the meantime.
    answer_each(conn, 2, lambda item: f"{item.id} by {replica.index}, max {max_tokens}", 0.02)


def answer_each(conn: Any, want: int, text: Callable[[Any], str], pause: float = 0.0) -> None:
    """Ask for ``want`` prompts at a time and answer each with ``text(item)``, until the
    coordinator says the end (``pause`` seconds after each answer)."""
    conn.send(("ready", None))
    while True:
        conn.send(("want", want))
        kind, items = conn.recv()
        if kind == "end":
            conn.send(("done", None))
            os._exit(0)
        if not items:
            time.sleep(0.05)
        for item in items:
            answer = Completion(text(item), 3, 2, "stop")
            conn.send(
                ("outcome", {"id": item.id, "completion": answer, "error": None, "question": "q"})
            )
            if pause:
                time.sleep(pause)
