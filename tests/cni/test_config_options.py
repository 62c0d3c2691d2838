"""`--cni-socket` and `--kubeconfig`: defaults, the data-dir-relative socket, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from contivd.config import ConfigError, load


def test_defaults_and_a_relative_socket_under_the_data_dir(tmp_path: Path) -> None:
    default = load({}, environ={})
    assert default.cni_socket_path == Path("/run/contiv/contiv-cni.sock") and default.kubeconfig is None
    relative = load({"cni_socket": "cni.sock", "data_dir": str(tmp_path)}, environ={})
    assert relative.cni_socket_path == tmp_path / "cni.sock"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    assert load({}, environ={"CONTIVD_KUBECONFIG": str(kubeconfig)}).kubeconfig == kubeconfig


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        ({"cni_socket": "/run/" + "x" * 120}, "--cni-socket: '/run/xxx"),
        ({"kubeconfig": "/nonexistent/kubeconfig"}, "--kubeconfig: '/nonexistent/kubeconfig' must be a readable file"),
    ],
)
def test_bad_values_are_refused_with_the_option_named(flags: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(flags, environ={})
    assert problem in str(caught.value)
