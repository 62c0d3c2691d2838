"""`contivd ctl` in-process through click's CliRunner, checking the invariants every invocation must
keep (exit status, no traceback): tests/ctl's and every other folder's that drives ctl."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from click.testing import CliRunner, Result

from contivd.cli import cli

NO_CTL_ENV: Mapping[str, str | None] = {"CONTIVD_SERVER": None, "CONTIVD_TOKEN": None, "NETMASTER": None, "INSECURE": None}


def invoke(args: list[str], env: Mapping[str, str | None] = NO_CTL_ENV, code: int = 0) -> Result:
    """Run `contivd <args>` in-process through the real top-level group (so the mount is
    covered too) and assert the exit status and that no traceback escaped."""
    result = CliRunner().invoke(cli, args, env=dict(env), prog_name="contivd")  # as the installed command names itself
    shown = result.output + result.stderr
    assert result.exit_code == code, f"exit {result.exit_code} != {code} for {args}:\n{shown}"
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in shown
    return result


@dataclass
class Ctl:
    """`contivd ctl --server <node> ...`."""

    server: str

    def __call__(self, *args: str, code: int = 0) -> Result:
        return invoke(["ctl", "--server", self.server, *args], code=code)

    def fails(self, *args: str, message: str) -> str:
        """The server refused: exit 3 (netctl's), nothing on stdout, `Error: <message>` on stderr."""
        result = self(*args, code=3)
        assert result.stdout == "", result.stdout
        assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr
        return result.stderr

    def refuses(self, *args: str, message: str, shows_help: bool = False) -> str:
        """Refused before any request, as netctl refuses it: exit 1, `Error: <netctl's message>` on
        stderr, and on stdout the command's help in netctl's layout where netctl prints it."""
        result = self(*args, code=1)
        assert result.stderr == f"Error: {message}\n", result.stderr
        if shows_help:
            assert result.stdout.startswith("NAME:\n   contivd ctl "), result.stdout
        else:
            assert result.stdout == "", result.stdout
        return result.stdout
