"""The group's key ring: the secrets that make a peer a member, and how they roll over.

Theory of operation (the wire layer's gate of section 1 of the ToTo paper: Trans and
Transis assume an authentic group; here holding a group key is what makes a peer a
member). A ``Keyring`` holds one or more 32-byte keys, each with a numeric id carried in
the clear in every datagram (``auth``). The highest id is the *newest* key. A daemon
accepts every key of its ring and sends with the newest key that every peer it hears
from also holds (each datagram advertises its sender's newest id), so a rolling key
change never has a node send with a key a live peer cannot open:

1. make a new key (``amcast keygen --rotate``: the ring keeps the old key and adds
   id + 1) and copy the file to every node; reload each daemon (SIGHUP). Nodes keep
   sending with the old key until every live peer advertises the new one;
2. once ``amcast status`` shows every peer sending with the new id, retire the old key
   (``amcast keygen --retire``) everywhere and reload again.

The key file format (text, one key per line, ``#`` comments)::

    # amcast authkey
    1 9f3a...64 hex digits...
    2 77b1...

File reading, its mode checks and key generation belong to the daemon and the CLI;
this module only parses, validates and formats (sans-IO).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

KEY_BYTES = 32
"""Length of every group key (AES-256)."""
MIN_LEGACY_KEY_BYTES = 16
"""A ``NodeConfig.group_key`` given inline (tests, the simulator) may be this short; it is
stretched by HKDF like every key, so only its entropy matters."""
MAX_KEY_ID = 0xFFFF
MAX_KEYS = 8
"""Keys one ring may hold (a rollover needs two)."""


@dataclass(frozen=True, slots=True)
class Keyring:
    """Keys by id, ascending; ``newest`` is the highest id."""

    keys: tuple[tuple[int, bytes], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigurationError("the key ring is empty")
        if len(self.keys) > MAX_KEYS:
            raise ConfigurationError(f"the key ring holds {len(self.keys)} keys, at most "
                                     f"{MAX_KEYS}: retire old ones (amcast keygen --retire)")
        ids = [key_id for key_id, _ in self.keys]
        if ids != sorted(set(ids)):
            raise ConfigurationError(f"key ids must be distinct and ascending: {ids}")
        for key_id, key in self.keys:
            if not 1 <= key_id <= MAX_KEY_ID:
                raise ConfigurationError(f"key id {key_id} is outside 1..{MAX_KEY_ID}")
            if len(key) < MIN_LEGACY_KEY_BYTES:
                raise ConfigurationError(
                    f"key {key_id} has {len(key)} bytes, at least {MIN_LEGACY_KEY_BYTES}")

    @classmethod
    def single(cls, key: bytes, key_id: int = 1) -> Keyring:
        return cls(((key_id, key),))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(key_id for key_id, _ in self.keys)

    @property
    def newest(self) -> int:
        return self.keys[-1][0]

    def get(self, key_id: int) -> bytes | None:
        for kid, key in self.keys:
            if kid == key_id:
                return key
        return None

    def newest_at_most(self, bound: int) -> int | None:
        """The highest id of this ring that is <= ``bound`` (``None``: none is)."""
        best = None
        for key_id, _ in self.keys:
            if key_id <= bound:
                best = key_id
        return best

    def rotated(self, new_key: bytes) -> Keyring:
        """This ring plus ``new_key`` as the newest (id + 1)."""
        if len(new_key) != KEY_BYTES:
            raise ConfigurationError(f"a new key must have {KEY_BYTES} bytes")
        if self.newest >= MAX_KEY_ID:
            raise ConfigurationError("key ids are exhausted: start a new ring (amcast keygen)")
        return Keyring((*self.keys, (self.newest + 1, new_key)))

    def retired(self) -> Keyring:
        """Only the newest key."""
        return Keyring((self.keys[-1],))

    # ------------------------------------------------------------------ key file text

    @classmethod
    def parse(cls, text: str, source: str = "key file") -> Keyring:
        """Parse key file text; ``ConfigurationError`` naming the line otherwise."""
        keys: list[tuple[int, bytes]] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[0].isdigit():
                raise ConfigurationError(f"{source} line {number}: expected '<id> <hex key>'")
            try:
                key = bytes.fromhex(parts[1])
            except ValueError:
                raise ConfigurationError(f"{source} line {number}: the key is not hex") from None
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"{source} line {number}: the key has {len(key)} bytes, not {KEY_BYTES}")
            keys.append((int(parts[0]), key))
        if not keys:
            raise ConfigurationError(f"{source} holds no key (make one: amcast keygen)")
        keys.sort()
        try:
            return cls(tuple(keys))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None

    def format(self) -> str:
        lines = ["# amcast authkey: '<id> <key>' per line; the highest id is the newest.",
                 "# Keep it secret (mode 0400), the same file on every node."]
        lines.extend(f"{key_id} {key.hex()}" for key_id, key in self.keys)
        return "\n".join(lines) + "\n"
