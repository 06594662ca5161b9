"""How every command line entry point reports a failure: one ``error: ...`` line and a documented rc.

rc 2: input or configuration (a malformed argument, a bad config value, a missing or unreadable input);
rc 3: the registry or its database (unreachable, of a newer version, the embedded server cannot start);
rc 4: an output that cannot be written (disk full, permissions). Anything else is a bug and keeps its
traceback. Every parser of the CLI (``run``, ``show``, ``db``, ``audit``, ``stoplist``,
``cross-encoder`` and their subcommands) is an ``ErrorLineParser``, so a malformed argument is one line
too, not argparse's ``prog: error:`` form.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

RC_INPUT = 2
RC_REGISTRY = 3
RC_OUTPUT = 4


class ErrorLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are the CLI's ``error:`` line (rc 2) after the usage line.

    ``add_subparsers`` makes its subparsers of the parser's own class, so a whole tree built from one
    ErrorLineParser reports alike.
    """

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"error: {self.prog}: {one_line(message)}", file=sys.stderr)
        raise SystemExit(RC_INPUT)


def one_line(text: str) -> str:
    """``text`` on one line (libpq's and the server's messages span several)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def rc_of(exc: BaseException) -> int | None:
    """The documented rc of ``exc``, or None for an error that is a bug (it keeps its traceback)."""
    from dedup_tasks.config import ConfigError
    from dedup_tasks.contract import ContractError
    from dedup_tasks.io import InputError, OutputError

    if isinstance(exc, (ConfigError, ContractError, InputError)):
        return RC_INPUT
    if isinstance(exc, OutputError):
        return RC_OUTPUT
    if _is_registry_error(exc):
        return RC_REGISTRY
    return None


def _is_registry_error(exc: BaseException) -> bool:
    """The registry's own failures (version, database unreachable or failing, embedded server)."""
    import psycopg2

    from dedup_tasks.registry.embedded import EmbeddedPostgresError
    from dedup_tasks.registry.migrate import RegistryVersionError

    return isinstance(exc, (psycopg2.Error, EmbeddedPostgresError, RegistryVersionError))


def report(exc: BaseException, rc: int) -> int:
    """Print ``exc`` as the one ``error:`` line (a DSN's password is never in libpq's messages); return rc."""
    import psycopg2

    text = one_line(str(exc))
    if isinstance(exc, psycopg2.OperationalError):
        text = f"registry database: {text}"
    print(f"error: {text or type(exc).__name__}", file=sys.stderr)
    return rc


def report_or_raise(exc: BaseException) -> int:
    """The rc after printing the error line for a classified error; re-raises any other one."""
    rc = rc_of(exc)
    if rc is None:
        raise exc
    return report(exc, rc)
