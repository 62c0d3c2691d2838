"""The Debian mirror the nspawn test's debootstrap uses: the one apt here uses for bookworm."""

from __future__ import annotations

from pathlib import Path

from tests.packaging.nspawn import debian_mirror


def test_deb822_sources_name_the_bookworm_mirror(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_one_line_sources_and_the_default(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("# comment\ndeb [arch=amd64] http://one.example/debian bookworm main\n")
    assert debian_mirror(tmp_path) == "http://one.example/debian"
    assert debian_mirror(tmp_path / "none") == "http://deb.debian.org/debian"
