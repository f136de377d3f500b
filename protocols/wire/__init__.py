"""Wire layer: the datagram codec, its hard size limits and its authentication tag.

Section 1 of the ToTo paper (Trans / Transis): every datagram piggybacks positive
acknowledgements (the causality DAG's edges) and negative acknowledgements (gaps to
repair). ``codec`` maps datagrams to msgpack bytes and back, ``auth`` seals them with an
HMAC-SHA256 tag checked before anything is decoded, ``limits`` bounds every field.
"""
