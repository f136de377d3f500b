"""amcastd: thin asyncio glue (uvloop) around the sans-IO ``amcast.protocols.Node``.

One module per job. ``runner`` holds the ``Daemon``, the event-loop glue that owns the
rest: the inputs and the pump. Beside it, each called with the daemon: ``fanout``
(deliveries and events to clients, logs and metrics; the ledger's reports), ``health``
(health, ``status``, ``welcome``), ``observe`` (metrics snapshots, log failures),
``shutdown`` (the graceful stop), ``reload`` (SIGHUP). Below: ``api`` (the unix-socket
server), ``access`` (who may do what), ``groups`` (group membership), ``submitq`` (submit
queue and ledger), ``config`` (pydantic + TOML + env), ``state`` (the durable state
file), ``logs`` and ``trace`` (structlog, the delivery log, the latency trace),
``metrics``, ``metrics_http`` and ``metrics_access`` (Prometheus), ``refusals``,
``keyfile``, ``notify`` (systemd), ``native`` (the compiled core's guard), ``preflight``
(``amcastd --check``); the transports ``transport`` (the datagram-socket base, IP
multicast), ``unicast`` and ``redundant``, and ``transports`` above them, which opens the
one the configuration names; ``main`` is the ``amcastd`` console script.
"""
