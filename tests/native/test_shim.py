"""The switch between the native data path and the Python reference (``AMCAST_CORE``):
these run whether or not the extension is built."""

from __future__ import annotations

import pytest
from amcast.protocols.wire import native
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.replay import ReplayGuard

RING = Keyring.single(bytes(range(32)))
SESSION = bytes(range(16))


def test_pure_selects_the_python_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.CORE_ENV, "pure")
    assert native.core_name() == "pure"
    assert type(native.make_authenticator(RING, SESSION)) is Authenticator
    assert type(native.make_replay_guard(30.0, 8)) is ReplayGuard


def test_native_without_the_extension_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.CORE_ENV, "native")
    monkeypatch.setattr(native, "native_module", lambda: None)
    with pytest.raises(ImportError, match="make rust"):
        native.make_authenticator(RING, SESSION)


def test_auto_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.CORE_ENV, raising=False)
    monkeypatch.setattr(native, "native_module", lambda: None)
    assert native.core_name() == "pure"
    assert type(native.make_authenticator(None, SESSION)) is Authenticator


def test_an_unknown_core_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.CORE_ENV, "mypyc")
    with pytest.raises(ValueError, match="AMCAST_CORE"):
        native.core_name()


def test_native_is_selected_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    module = native.native_module()
    if module is None:
        pytest.skip("amcast_native is not built (make rust): only the Python core runs")
    for value in ("native", "auto", ""):
        monkeypatch.setenv(native.CORE_ENV, value)
        assert native.core_name() == "native"
        assert type(native.make_authenticator(RING, SESSION)) is module.Authenticator
        assert type(native.make_replay_guard(30.0, 8)) is module.ReplayGuard
