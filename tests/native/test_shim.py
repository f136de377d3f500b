"""The switch between the native data path and the Python reference (``AMCAST_CORE``):
these run whether or not the extension is built."""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial

import pytest
from amcast.daemon import preflight
from amcast.daemon.config import DaemonConfig, env_overrides
from amcast.daemon.socket_io import IO_ENV
from amcast.protocols import extension
from amcast.protocols.errors import DecodeError
from amcast.protocols.node import Node
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.ordering import native as ordering_native
from amcast.protocols.ordering.engine import TotalOrderEngine
from amcast.protocols.reliable import native as reliable_native
from amcast.protocols.wire import codec, native
from amcast.protocols.wire.auth import Authenticator
from amcast.protocols.wire.codec import Datagram, Kind, encode_body
from amcast.protocols.wire.keys import Keyring
from amcast.protocols.wire.limits import WireLimits
from amcast.protocols.wire.replay import ReplayGuard

from bench import cluster as bench_cluster

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


def test_the_decoder_follows_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    body = encode_body(Datagram(Kind.NACK, 1, 2, 3, ((1, 1, 1),)))
    monkeypatch.setenv(native.CORE_ENV, "pure")
    pure = native.make_decoder(WireLimits())
    assert isinstance(pure, partial) and pure.func is codec.decode_body
    assert pure(body) == codec.decode_body(body, WireLimits())
    monkeypatch.setenv(native.CORE_ENV, "native")
    monkeypatch.setattr(native, "native_module", lambda: None)
    with pytest.raises(ImportError, match="make rust"):
        native.make_decoder(WireLimits())
    monkeypatch.setenv(native.CORE_ENV, "auto")
    assert isinstance(native.make_decoder(WireLimits()), partial)


def test_the_decoder_core_is_what_the_node_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """``decoder_core`` names the decoder ``decode_body`` uses for a ``WireLimits``: what
    ``Node.core`` (and ``amcast status``, the start line and ``amcast_core_info``) say."""
    monkeypatch.setenv(native.CORE_ENV, "pure")
    assert native.decoder_core(WireLimits(max_vertices=7)) == "pure"
    if native.native_module() is not None:
        monkeypatch.setenv(native.CORE_ENV, "native")
        assert native.decoder_core(WireLimits(max_vertices=9)) == "native"
    monkeypatch.setattr(native, "native_module", lambda: None)
    monkeypatch.setenv(native.CORE_ENV, "auto")
    assert native.decoder_core(WireLimits(max_vertices=11)) == "pure"


def test_the_node_call_site_chooses_once_per_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """``native.decode_body`` (the Node's) picks the core when a ``WireLimits`` first
    decodes and keeps it: ``AMCAST_CORE`` is not read per datagram."""
    body = encode_body(Datagram(Kind.NACK, 1, 2, 3, ((1, 1, 1),)))
    limits = WireLimits(max_vertices=5)
    monkeypatch.setenv(native.CORE_ENV, "pure")
    expected = codec.decode_body(body, limits)
    assert native.decode_body(body, limits) == expected
    assert isinstance(native._decoders[id(limits)][1], partial)
    monkeypatch.setenv(native.CORE_ENV, "mypyc")  # refused if it were read again
    assert native.decode_body(body, limits) == expected
    with pytest.raises(DecodeError, match="empty nack"):
        native.decode_body(encode_body(Datagram(Kind.NACK, 1, 2, 3)), limits)


def test_the_native_decoder_is_selected_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    module = native.native_module()
    if module is None:
        pytest.skip("amcast_native is not built (make rust): only the Python core runs")
    monkeypatch.setenv(native.CORE_ENV, "auto")
    assert type(native.make_decoder(WireLimits())) is module.Decoder


def test_a_stale_extension_is_not_used_for_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension built before the decoder (no ``Decoder``) or before its current
    arguments: Python decodes under ``auto``; ``native`` says to rebuild."""

    class Old:
        class Decoder:
            def __init__(self, *args: object) -> None:
                raise TypeError("Decoder.__new__() takes from 7 to 8 positional arguments")

    for stale in (Old, object()):
        monkeypatch.setattr(native, "native_module", lambda stale=stale: stale)
        monkeypatch.setenv(native.CORE_ENV, "auto")
        assert isinstance(native.make_decoder(WireLimits()), partial)
        monkeypatch.setenv(native.CORE_ENV, "native")
        with pytest.raises(ImportError, match="older than amcast"):
            native.make_decoder(WireLimits())


def test_the_daemon_takes_amcast_core_as_the_core_not_as_a_config_override() -> None:
    # AMCAST_<SECTION>__<KEY> are overrides; AMCAST_CORE picks the core (an override
    # would refuse it: no section) and the daemon's documented `AMCAST_CORE=pure amcastd`
    assert (native.CORE_ENV, native.SEAL_ENV) == ("AMCAST_CORE", "AMCAST_SEAL")
    assert reliable_native.RELIABLE_ENV == "AMCAST_RELIABLE"
    assert env_overrides({native.CORE_ENV: "pure", native.SEAL_ENV: "native",
                          reliable_native.RELIABLE_ENV: "native", IO_ENV: "pure",
                          "AMCAST_NETWORK__PORT": "42999"}) == {"network": {"port": 42999}}


def test_sealing_follows_the_core_only_where_it_is_asked_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.SEAL_ENV, raising=False)
    monkeypatch.setattr(native, "SEAL_BY_DEFAULT", False)
    assert native.seal_core("native") == "pure"  # off where the default is off
    monkeypatch.setattr(native, "SEAL_BY_DEFAULT", True)
    if native.native_module() is not None:
        assert native.seal_core("native") == "native"  # the default: it follows the core
    assert native.seal_core("pure") == "pure"
    monkeypatch.setattr(native, "SEAL_BY_DEFAULT", False)
    assert native.seal_core("native", "pure") == "pure"
    assert native.seal_core("pure", "native") == "pure"  # never native where decoding is not
    sealer = native.make_sealer(RING, SESSION, replay_window_s=30.0, max_sessions=8,
                                core="pure", seal="native")
    assert type(sealer) is Authenticator
    with pytest.raises(ValueError, match="AMCAST_SEAL"):
        native.seal_core("native", "rust")
    monkeypatch.setattr(native, "native_module", lambda: None)
    assert native.seal_core("auto", "native") == "pure"  # auto: Python without the extension
    with pytest.raises(ImportError, match="make rust"):
        native.seal_core("native", "native")


def test_a_node_reports_the_core_of_each_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.CORE_ENV, "pure")
    monkeypatch.delenv("AMCAST_RELIABLE", raising=False)
    node = Node(NodeConfig(group_key=b"sixteen byte key"), node_id=0, members=[0, 1],
                rng=random.Random(1), now=0.0)
    assert node.core == {"decode": "pure", "seal": "pure", "order": "pure", "reliable": "pure"}
    monkeypatch.setenv("AMCAST_RELIABLE", "native")  # on the pure core: the Python layer
    assert node.core["reliable"] == "pure"
    monkeypatch.delenv("AMCAST_RELIABLE")
    if native.native_module() is not None:
        node = Node(NodeConfig(group_key=b"sixteen byte key"), node_id=0, members=[0, 1],
                    rng=random.Random(1), now=0.0, core="native", seal="native")
        assert node.core == {"decode": "native", "seal": "native", "order": "native",
                             "reliable": "native"}  # the reliable layer follows the core
        monkeypatch.setenv("AMCAST_RELIABLE", "pure")
        kept = Node(NodeConfig(group_key=b"sixteen byte key"), node_id=0, members=[0, 1],
                    rng=random.Random(1), now=0.0, core="native", seal="native")
        assert kept.core["reliable"] == "pure"
        monkeypatch.delenv("AMCAST_RELIABLE")
        assert type(node._auth) is native.NativeSealer
        swap = Node(NodeConfig(group_key=b"sixteen byte key", ordering="arrow"), node_id=0,
                    members=[0, 1], rng=random.Random(1), now=0.0, core="native")
        assert swap.core["order"] == "pure"  # the swap orderings are Python only


def test_bench_cluster_sets_the_core_of_every_daemon() -> None:
    parser = argparse.ArgumentParser()
    bench_cluster.add_arguments(parser)
    assert bench_cluster.core_env(parser.parse_args([]), 3) == []
    args = parser.parse_args(["--core", "native", "--seal", "native"])
    assert bench_cluster.core_env(args, 2) == [
        ["env", "AMCAST_CORE=native", "AMCAST_SEAL=native"]] * 2
    assert bench_cluster.core_env(parser.parse_args(["--core", "pure"]), 1) == [
        ["env", "AMCAST_CORE=pure"]]
    args = parser.parse_args(["--core", "native", "--reliable", "native"])
    assert bench_cluster.core_env(args, 1) == [
        ["env", "AMCAST_CORE=native", "AMCAST_RELIABLE=native"]]


class _Stale:
    """An extension module of another interface: every part the package would use is
    there, but it was built from other sources."""

    def __init__(self, interface: int | None) -> None:
        if interface is not None:
            self.INTERFACE = interface
        self.TotalOrderEngine = object
        self.ENGINE_MAX_MEMBERS = 128


@pytest.mark.parametrize(("interface", "word"), [(None, "older"), (0, "older"),
                                                 (extension.INTERFACE + 1, "newer")])
def test_an_extension_of_another_interface_is_refused_whole(
        monkeypatch: pytest.MonkeyPatch, interface: int | None, word: str) -> None:
    """A build older or newer than the package (its ``INTERFACE``) counts as absent: the
    pure core under ``auto`` (``stale`` says why), an ``ImportError`` with the
    reason under ``native``, for the data path and the engine alike."""
    monkeypatch.setitem(sys.modules, "amcast_native", _Stale(interface))
    extension._probe.cache_clear()
    try:
        assert extension.load() is None
        problem = extension.problem()
        assert problem is not None and word in problem and "make rust" in problem
        assert extension.stale() == problem
        monkeypatch.setenv(native.CORE_ENV, "auto")
        assert native.core_name() == "pure"
        assert isinstance(native.make_decoder(WireLimits()), partial)
        assert ordering_native.engine_class(None, 4) is TotalOrderEngine
        monkeypatch.setenv(native.CORE_ENV, "native")
        with pytest.raises(ImportError, match=f"interface .* {word} than the package"):
            native.make_decoder(WireLimits())
        with pytest.raises(ImportError, match=f"{word} than the package"):
            ordering_native.engine_class(None, 4)
    finally:
        extension._probe.cache_clear()


def test_the_built_extension_implements_the_packages_interface() -> None:
    """``make rust`` builds what this package expects (else every native test above
    would quietly run pure)."""
    try:
        import amcast_native
    except ImportError:
        pytest.skip("amcast_native is not built (make rust): only the Python core runs")
    assert amcast_native.INTERFACE == extension.INTERFACE
    assert extension.load() is amcast_native
    assert extension.problem() is None and extension.stale() is None


def test_the_daemons_check_says_whether_the_extension_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = DaemonConfig(protocol={"insecure": True})
    node_config = cfg.node_config()
    shown = preflight.effective(cfg, node_config, 1.0)["derived"]
    assert shown["native_extension"] == (extension.problem() or "used")
    monkeypatch.setitem(sys.modules, "amcast_native", _Stale(0))
    extension._probe.cache_clear()
    try:
        shown = preflight.effective(cfg, node_config, 1.0)["derived"]
        assert "older than the package" in shown["native_extension"]
        assert shown["core"] == {"decode": "pure", "seal": "pure"}
    finally:
        extension._probe.cache_clear()
