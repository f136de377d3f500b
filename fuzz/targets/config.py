"""Fuzz target ``config``: the daemon's configuration loader, from TOML bytes on disk.

Theory of operation: the input is the content of a config file. It is written to a
temporary file and read as ``amcastd`` reads it at start-up and on reload
(``amcast.daemon.config``): ``load_config`` (the stdlib ``tomllib`` then the pydantic
model), then ``DaemonConfig.node_config`` (the ``[protocol]`` table through the
engine's ``NodeConfig``) and ``DaemonConfig.limits``. ``ConfigurationError`` is the one
documented failure (``amcastd`` exits 2 with it); any other exception escapes to a
traceback and exit status 1, which is a finding. ``tomllib`` is instrumented as well
as ``amcast``: its branches are what lets the fuzzer find its way to valid tables.
"""

from __future__ import annotations

import atexit
import os
import re
import tempfile
from pathlib import Path

from amcast.daemon.config import DaemonConfig, load_config
from amcast.protocols.errors import ConfigurationError
from amcast.protocols.node_config import NodeConfig

INSTRUMENT = ("amcast", "tomllib")
MAX_LEN = 4096
TIMEOUT_S = 10
REFERENCE = Path(__file__).resolve().parents[2] / "config" / "amcastd.toml"

_fd, _PATH = tempfile.mkstemp(prefix="amcast-fuzz-", suffix=".toml")
os.close(_fd)
atexit.register(os.unlink, _PATH)


def test_one_input(data: bytes) -> None:
    with open(_PATH, "wb") as fh:
        fh.write(data)
    try:
        config = load_config(_PATH, environ={})
        config.limits(config.node_config())
    except ConfigurationError:
        pass


# ----------------------------------------------------------------------------- seeds

_COMMENTED_KEY = re.compile(rb"^# ([a-z_]+ = \S.*)$")
_SMALL = [
    b"",
    b"[node]\nid = 1\nmembers = [0, 1, 2]\n",
    b'[network]\ngroup = "239.1.2.3"\nport = 42999\ninterface = "127.0.0.1"\n',
    b'[api]\nsocket = "/tmp/a.sock"\nsocket_mode = "660"\nmax_message_bytes = 4096\n',
    b"[api]\nmax_groups = 2\nclient_queue_high_bytes = 65536\n",
    b'[protocol]\ninsecure = true\nrule = "gltoto"\nphi = 1.5\ndatagram_budget = 9000\n',
    b'[protocol]\ngroup_key = "0123456789abcdef0123"\nwindow_size = 16\n',
    b"[protocol]\nmax_message_size = 10\n",
    b'[logs]\nlevel = "debug"\nformat = "json"\n[metrics]\nport = 0\n',
    b"[shutdown]\ngrace_s = 1.5\n[health]\nstall_after_s = 2\n[systemd]\nnotify = true\n",
    b"protocol = 3\n",
    b"[node]\nid = 1e3\n",
    b"x = \xff\n",
]


def seeds() -> list[bytes]:
    """The reference config (every key, comments left out), each of its sections alone,
    small files."""
    lines = REFERENCE.read_bytes().splitlines(keepends=True)
    reference = b"".join(x for x in lines if x.strip() and not x.lstrip().startswith(b"#"))
    start = lines.index(b"[protocol]\n")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(b"[")), None)
    shown = [m.group(1) + b"\n" for x in lines[start:end] if (m := _COMMENTED_KEY.match(x))]
    keyed = b"[protocol]\n" + b"".join(shown)  # its keys are shown commented out
    insecure = keyed.replace(b"insecure = false", b"insecure = true")
    insecure = b"".join(x for x in insecure.splitlines(True) if not x.startswith(b"group_key"))
    out = [reference, keyed, insecure]
    sections = reference.split(b"\n[")
    out += [b"[" + s if i else s for i, s in enumerate(sections)]
    return out + _SMALL


def _keys() -> list[bytes]:
    from amcast.daemon.config import _Section

    names: set[str] = set(DaemonConfig.model_fields)
    for field in DaemonConfig.model_fields.values():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, _Section):
            names.update(model.model_fields)
    names.update(NodeConfig.__dataclass_fields__)
    return sorted(n.encode() for n in names)


DICTIONARY = [
    *_keys(),
    b"[",
    b"]",
    b"[[",
    b" = ",
    b'"',
    b"'''",
    b"true",
    b"false",
    b"inf",
    b"nan",
    b"1979-05-27T07:32:00Z",
    b"0x",
    b"0o",
    b"{",
    b"}",
    b"\n",
]
