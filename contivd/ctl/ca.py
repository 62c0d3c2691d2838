"""`contivd ctl cluster ca rotate`: a new cluster CA (admin role).

The nodes do the rest on their own (re-issue, trust old and new for the grace period, drop the
old). What is left to the operator is re-pinning clients, which the command's output spells out.
"""

from __future__ import annotations

import time

import click

from .client import Client

ROTATE_PATH = "/api/v1/cluster/ca/rotate/"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_grace(text: str) -> float:
    """`90`, `90s`, `30m`, `1h`, `7d` → seconds."""
    number, unit = (text[:-1], text[-1]) if text and text[-1] in _UNITS else (text, "s")
    try:
        value = float(number)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration: a number with an optional unit s, m, h or d (e.g. 30m)") from None
    return value * _UNITS[unit]


@click.group("ca")
def ca_group() -> None:
    """The cluster CA every node's TLS certificate is issued by."""


@ca_group.command("rotate")
@click.option("--grace", default="1h", show_default=True, help="How long nodes (and pinned clients) still trust the old CA: s, m, h or d.")
@click.pass_obj
def rotate(client: Client, grace: str) -> None:
    """Issue a new cluster CA. Every node trusts old and new at once, re-issues its certificate
    under the new one within seconds, and trusts only the new one after the grace period.
    Clients pinning the old CA keep working until then: re-pin them with the new fingerprint."""
    answer = client.post(ROTATE_PATH, {"grace": parse_grace(grace)})
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(answer["graceUntil"]))
    click.echo(f"new cluster CA sha256 {answer['fingerprint']}")
    click.echo(f"the old CA ({answer['previousFingerprint']}) stays trusted until {until}")
    click.echo(
        f"re-pin clients before then: contivd ctl --server https://NODE:9999 login --fingerprint {answer['fingerprint']} "
        "(or --ca-file with a node's tls/ca.crt)"
    )
