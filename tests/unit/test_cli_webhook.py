"""``graceguard webhook``'s command line: bad input ends with exit code 2 and one line, before
anything connects; who is trusted by default; the self-signed bootstrap makes a usable pair."""

from __future__ import annotations

import gc
import pathlib
import ssl

import pytest
from cryptography import x509
from typer.testing import CliRunner

from graceguard.adapters import selfsigned, webhook_server
from graceguard.cli import webhook
from graceguard.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "TLS: give --tls-cert and --tls-key, or --self-signed DIR"),
        (["--report-every", "soon"], "--report-every: invalid duration 'soon'"),
        (["--report-every", "-5m"], "--report-every: must be positive"),
        (
            ["--self-signed", "x", "--tls-cert", "a.crt"],
            "--self-signed: give either it or --tls-cert/--tls-key, not both",
        ),
        (["--tls-cert", "missing.crt", "--tls-key", "missing.key"], "--tls-cert: missing.crt: no"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["webhook", *args])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("graceguard: ") and message in line, line


def test_a_wrong_failure_policy_is_refused_by_the_parser() -> None:
    result = runner.invoke(app, ["webhook", "--failure-policy", "Sometimes"])
    assert result.exit_code == 2
    assert "Sometimes" in result.output


def test_the_controllers_service_account_is_trusted_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    assert webhook.default_trusted_user() == "system:serviceaccount:ops:graceguard"
    monkeypatch.delenv("POD_NAMESPACE")
    assert webhook.default_trusted_user() == "system:serviceaccount:graceguard-system:graceguard"


def test_the_self_signed_pair_is_made_once_and_serves(tmp_path: pathlib.Path) -> None:
    ca, cert, key = selfsigned.self_signed(tmp_path, ["127.0.0.1", "webhook.local"])
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    made = cert.read_bytes()
    again = selfsigned.self_signed(tmp_path, ["other"])
    assert again == (ca, cert, key) and cert.read_bytes() == made
    leaf = x509.load_pem_x509_certificate(cert.read_bytes())
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.read_bytes()))
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["webhook.local"]
    context = webhook_server.ReloadingTLS(cert, key).context
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_the_heap_is_frozen_after_a_build_at_most_every_ten_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda: calls.append("collect"))
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    now = [0.0]
    freezer = webhook_server.HeapFreezer(every=600, clock=lambda: now[0])
    freezer()  # the first build: the whole cache
    now[0] = 599
    freezer()
    assert calls == ["collect", "freeze"]
    now[0] = 600
    freezer()
    assert calls == ["collect", "freeze"] * 2
