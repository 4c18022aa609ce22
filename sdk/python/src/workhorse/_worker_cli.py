"""``python -m workhorse worker module:attribute [--queues a,b] [--concurrency N]``: runs the
``Worker`` or ``AsyncWorker`` that ``attribute`` of ``module`` names (or that a function of no
arguments there returns) until SIGTERM or SIGINT, then drains: no more claims, running handlers
finish (up to its shutdown timeout), the worker leaves the registry, and the command exits 0.
Its events are logged on stderr (``--log-level``, default INFO)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from typing import Any, TextIO

from .errors import WorkhorseError


def add_worker_command(commands: Any) -> None:
    summary = "run a worker from an import path until SIGTERM or Ctrl+C, then drain"
    command = commands.add_parser("worker", help=summary, description=summary)
    command.add_argument("target", metavar="module:attribute", help="a Worker or AsyncWorker, or a function of no arguments returning one")
    command.add_argument("--queues", help="the queues to claim from, comma separated (default: the worker's)")
    command.add_argument("--concurrency", type=int, help="jobs run at once (default: the worker's)")
    command.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="of the workhorse logger (default INFO)")


def load_worker(target: str) -> Any:
    """The worker ``module:attribute`` names (the current directory is importable, as for ``python -m``)."""
    from ._worker_base import WorkerBase

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{target!r} is not an import path of the form module:attribute")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not isinstance(found, WorkerBase) and callable(found):
        found = found()
    if not isinstance(found, WorkerBase):
        raise ValueError(f"{target} is not a Worker or AsyncWorker (nor a function returning one)")
    return found


def run_worker(args: argparse.Namespace, err: TextIO) -> int:
    from .aio import AsyncWorker

    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("workhorse")
    logger.addHandler(handler)
    logger.setLevel(args.log_level)
    try:
        worker = load_worker(args.target)
        overrides: dict[str, Any] = {}
        if args.queues is not None:
            overrides["queues"] = [q.strip() for q in args.queues.split(",") if q.strip()]
        if args.concurrency is not None:
            overrides["concurrency"] = args.concurrency
        worker.configure(**overrides)
        if isinstance(worker, AsyncWorker):
            asyncio.run(worker.run(handle_signals=True))
        else:
            worker.run(handle_signals=True)
        return 0
    except (WorkhorseError, ValueError, ImportError, AttributeError) as error:
        err.write(f"workhorse: {type(error).__name__}: {error}\n")
        return 1
    finally:
        logger.removeHandler(handler)
