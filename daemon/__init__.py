"""amcastd: thin asyncio glue (uvloop) around the sans-IO ``amcast.protocols.Node``.

One module per job: ``config`` (pydantic + TOML + env), ``transport`` (multicast
sockets), ``frames``/``envelope`` (codecs), ``api`` (unix-socket server), ``metrics``
(Prometheus), ``logs`` (structlog and the JSON-lines delivery log), ``notify`` (systemd),
``runner`` (the event loop glue) and ``main`` (the ``amcastd`` console script).
"""
